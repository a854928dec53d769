//! [`Json`]: a JSON column read into any type of the application's, from
//! a JSON type or from text (MariaDB's `JSON` is a `LONGTEXT`).

use serde::de::{self, Deserializer, Visitor};

use crate::de::JSON_NEWTYPE;

/// A JSON column of any type `T`: the column's JSON text is parsed into
/// `T` (for PostgreSQL's `json`/`jsonb` and MySQL's `JSON`, a plain field
/// of type `T` does the same; MariaDB's `JSON` is a `LONGTEXT`, which this
/// wrapper parses and a plain `serde_json::Value` field would take as a
/// string). Serializes as `T` does.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Json<T>(pub T);

impl<T: serde::Serialize> serde::Serialize for Json<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de, T: de::Deserialize<'de>> de::Deserialize<'de> for Json<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json<T>, D::Error> {
        struct Inner<T>(std::marker::PhantomData<T>);
        impl<'de, T: de::Deserialize<'de>> Visitor<'de> for Inner<T> {
            type Value = Json<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Json<T>, D::Error> {
                T::deserialize(d).map(Json)
            }
        }
        d.deserialize_newtype_struct(JSON_NEWTYPE, Inner(std::marker::PhantomData))
    }
}
