//! Building the application's record type from a row of [`Value`]s with
//! serde: the record's fields are the declared columns, by name (a struct)
//! or in order (a tuple). The same code builds a record read from the
//! database and one read from the cache, from the same values.
//!
//! Each value answers the type the field asks for: an integer column
//! fills an `i64`, a `u8` (range-checked) or a `bool` (`TINYINT(1)`); a
//! `DECIMAL` fills `rust_decimal::Decimal`, `bigdecimal::BigDecimal` or a
//! `String`, exactly; dates and times fill chrono's types (ISO 8601 text);
//! a UUID fills `uuid::Uuid` (from PostgreSQL's type, MariaDB's, or text);
//! a JSON column fills
//! `serde_json::Value` or any type of the application's; an `ENUM` fills a
//! unit-variant Rust enum; `NULL` fills an `Option`.

use std::fmt::Display;

use serde::de::{
    self, value::SeqDeserializer, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess,
    SeqAccess, Visitor,
};

use crate::value::Value;

/// The name [`crate::Json`] asks for, so that a text column's JSON is
/// parsed.
pub(crate) const JSON_NEWTYPE: &str = "kura_record::Json";

/// What went wrong building a record.
#[derive(Debug)]
pub struct DeError(pub(crate) String);

impl Display for DeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: Display>(msg: T) -> DeError {
        DeError(msg.to_string())
    }
}

/// A row: the declared columns' names and the values.
pub(crate) struct RowDe<'a> {
    pub(crate) names: &'a [&'a str],
    pub(crate) values: &'a [Value],
}

/// Builds a `T` from a row; the error names the column that did not fit.
pub(crate) fn from_row<T: de::DeserializeOwned>(
    names: &[&str],
    values: &[Value],
) -> Result<T, String> {
    T::deserialize(RowDe { names, values }).map_err(|e| e.0)
}

impl<'de> Deserializer<'de> for RowDe<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_map(Fields { row: self, at: 0 })
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_seq(Fields { row: self, at: 0 })
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, v: V) -> Result<V::Value, DeError> {
        self.deserialize_seq(v)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        v: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(v)
    }

    fn is_human_readable(&self) -> bool {
        true
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct map struct enum identifier ignored_any
    }
}

/// The columns of a row, as a map (by name) or a sequence.
struct Fields<'a> {
    row: RowDe<'a>,
    at: usize,
}

impl Fields<'_> {
    fn name(&self) -> &str {
        self.row.names.get(self.at).copied().unwrap_or("?")
    }

    fn wrap(&self, e: DeError) -> DeError {
        DeError(format!("column {}: {}", self.name(), e.0))
    }
}

impl<'de> MapAccess<'de> for Fields<'_> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        k: K,
    ) -> Result<Option<K::Value>, DeError> {
        match self.row.names.get(self.at) {
            Some(n) => k.deserialize(n.into_deserializer()).map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, s: S) -> Result<S::Value, DeError> {
        let v = self.row.values.get(self.at).unwrap_or(&Value::Null);
        let r = s.deserialize(ValueDe(v)).map_err(|e| self.wrap(e));
        self.at += 1;
        r
    }
}

impl<'de> SeqAccess<'de> for Fields<'_> {
    type Error = DeError;

    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        s: S,
    ) -> Result<Option<S::Value>, DeError> {
        let Some(v) = self.row.values.get(self.at) else {
            return Ok(None);
        };
        let r = s.deserialize(ValueDe(v)).map_err(|e| self.wrap(e));
        self.at += 1;
        r.map(Some)
    }
}

/// One value, answering the type its field asks for.
pub(crate) struct ValueDe<'a>(pub(crate) &'a Value);

/// Parses a column's JSON text and lets `f` hand it to the visitor.
fn json<'de, V: Visitor<'de>>(
    text: &str,
    f: impl FnOnce(serde_json::Value, V) -> Result<V::Value, serde_json::Error>,
    v: V,
) -> Result<V::Value, DeError> {
    let parsed: serde_json::Value =
        serde_json::from_str(text).map_err(|e| DeError(format!("JSON: {e}")))?;
    f(parsed, v).map_err(|e| DeError(format!("JSON: {e}")))
}

impl<'de> Deserializer<'de> for ValueDe<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Null => v.visit_unit(),
            Value::Bool(b) => v.visit_bool(*b),
            Value::Int(i) => v.visit_i64(*i),
            Value::UInt(u) => v.visit_u64(*u),
            Value::Float(f) => v.visit_f32(*f),
            Value::Double(f) => v.visit_f64(*f),
            Value::Decimal(s) | Value::Text(s) => v.visit_str(s),
            Value::Bytes(b) => v.visit_bytes(b),
            Value::Json(j) => json(j, |d, v| d.deserialize_any(v), v),
            other => v.visit_string(other.iso().unwrap_or_default()),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Null => v.visit_none(),
            _ => v.visit_some(self),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Int(i) => v.visit_bool(*i != 0),
            Value::UInt(u) => v.visit_bool(*u != 0),
            _ => self.deserialize_any(v),
        }
    }

    fn deserialize_f32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        self.deserialize_f64(v)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Decimal(s) => v.visit_f64(
                s.parse()
                    .map_err(|_| DeError(format!("decimal {s} is not a float")))?,
            ),
            _ => self.deserialize_any(v),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Bytes(b) => match std::str::from_utf8(b) {
                Ok(s) => v.visit_str(s),
                Err(_) => v.visit_bytes(b),
            },
            Value::Json(j) => v.visit_str(j),
            _ => self.deserialize_any(v),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        self.deserialize_str(v)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Uuid(u) => v.visit_bytes(u.as_bytes()),
            // MariaDB's UUID type arrives as binary text: a `Uuid` field
            // parses it (a byte buffer takes a str's bytes alike); 16 bytes
            // are a UUID's own.
            Value::Bytes(b) if b.len() != 16 => match std::str::from_utf8(b) {
                Ok(s) => v.visit_str(s),
                Err(_) => v.visit_bytes(b),
            },
            Value::Json(j) => v.visit_str(j),
            _ => self.deserialize_any(v),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        self.deserialize_bytes(v)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Bytes(b) => v.visit_seq(SeqDeserializer::new(b.iter().copied())),
            Value::Uuid(u) => v.visit_seq(SeqDeserializer::new(u.as_bytes().iter().copied())),
            Value::Json(j) => json(j, |d, v| d.deserialize_seq(v), v),
            _ => self.deserialize_any(v),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Json(j) => json(j, |d, v| d.deserialize_tuple(len, v), v),
            _ => self.deserialize_seq(v),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Json(j) => json(j, |d, v| d.deserialize_map(v), v),
            Value::Text(t) => json(t, |d, v| d.deserialize_map(v), v),
            _ => self.deserialize_any(v),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Json(j) | Value::Text(j) => {
                json(j, |d, v| d.deserialize_struct(name, fields, v), v)
            }
            _ => self.deserialize_any(v),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Text(s) => v.visit_enum(s.as_str().into_deserializer()),
            Value::Json(j) => json(j, |d, v| d.deserialize_enum(name, variants, v), v),
            _ => self.deserialize_any(v),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Json(j) | Value::Text(j) if name == JSON_NEWTYPE => {
                json(j, |d, v| v.visit_newtype_struct(d), v)
            }
            Value::Bytes(b) if name == JSON_NEWTYPE => match std::str::from_utf8(b) {
                Ok(j) => json(j, |d, v| v.visit_newtype_struct(d), v),
                Err(_) => Err(DeError("JSON: not UTF-8".into())),
            },
            _ => v.visit_newtype_struct(self),
        }
    }

    /// Dates, times, UUIDs and decimals are text: chrono's, uuid's,
    /// rust_decimal's and bigdecimal's types read their text forms.
    fn is_human_readable(&self) -> bool {
        true
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 char unit unit_struct tuple_struct
        identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Json;
    use chrono::{NaiveDate, NaiveDateTime};
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    enum Rarity {
        #[serde(rename = "common")]
        Common,
        #[serde(rename = "rare")]
        Rare,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Row {
        id: i64,
        small: u8,
        flag: bool,
        price: String,
        at: NaiveDateTime,
        day: Option<NaiveDate>,
        rarity: Rarity,
        meta: Json<serde_json::Value>,
        blob: Vec<u8>,
    }

    #[test]
    fn a_row_builds_a_struct_by_column_name() {
        let at = NaiveDate::from_ymd_opt(2024, 1, 2)
            .and_then(|d| d.and_hms_micro_opt(3, 4, 5, 600))
            .expect("datetime");
        let names = [
            "id", "small", "flag", "price", "at", "day", "rarity", "meta", "blob",
        ];
        let values = vec![
            Value::Int(1),
            Value::UInt(200),
            Value::Int(1),
            Value::Decimal("12.50".into()),
            Value::DateTime(at),
            Value::Null,
            Value::Text("rare".into()),
            Value::Text("{\"a\":1}".into()),
            Value::Bytes(vec![1, 2]),
        ];
        let row: Row = from_row(&names, &values).expect("row");
        assert_eq!(
            row,
            Row {
                id: 1,
                small: 200,
                flag: true,
                price: "12.50".into(),
                at,
                day: None,
                rarity: Rarity::Rare,
                meta: Json(serde_json::json!({"a": 1})),
                blob: vec![1, 2],
            }
        );
        let mut bad = values.clone();
        bad[1] = Value::UInt(300);
        let e = from_row::<Row>(&names, &bad).expect_err("300 is not a u8");
        assert!(e.contains("column small"), "{e}");
        assert!(matches!(
            from_row::<Row>(&names[..1], &[Value::Int(1)]),
            Err(e) if e.contains("missing field")
        ));
        let _ = Rarity::Common;
    }
}
