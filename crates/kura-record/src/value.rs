//! A column's value as kura-record reads it from MariaDB/MySQL or
//! PostgreSQL and keeps it in the cache: the cache holds a record as its
//! row (one [`Value`] per declared column, in declaration order), never as
//! the application's type, so a record read from the cache is built from
//! the same values as one read from the database (`de.rs` builds it).
//!
//! [`Class`] is how a column's SQL type is read. A SQL type with no class
//! is refused when its table is declared, with the column's name and type.

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Timelike, Utc};
use serde::{Deserialize, Serialize};

/// One column's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// Signed integers of every width.
    Int(i64),
    /// MariaDB/MySQL's unsigned integers.
    UInt(u64),
    /// `FLOAT`/`REAL`/`FLOAT4`.
    Float(f32),
    /// `DOUBLE`/`FLOAT8`.
    Double(f64),
    /// `DECIMAL`/`NUMERIC`, exact, as the database writes it (`12.50`).
    Decimal(String),
    /// `CHAR`, `VARCHAR`, `TEXT` (every size), `ENUM`, `SET`.
    Text(String),
    /// `BINARY`, `VARBINARY`, `BLOB` (every size), `BYTEA`.
    Bytes(Vec<u8>),
    Date(NaiveDate),
    Time(NaiveTime),
    /// `DATETIME`, PostgreSQL's `TIMESTAMP` (without time zone).
    DateTime(NaiveDateTime),
    /// MariaDB/MySQL's `TIMESTAMP` and PostgreSQL's `TIMESTAMPTZ`: an
    /// instant, in UTC.
    Timestamp(DateTime<Utc>),
    /// `JSON`/`JSONB` (MySQL's JSON type), as JSON text.
    Json(String),
    Uuid(uuid::Uuid),
}

/// How a column is read: the SQL types of both databases, grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Class {
    Bool,
    /// A signed integer of this many bytes (PostgreSQL reads each width
    /// as its own type; MariaDB's are all read as 8).
    Int(u8),
    UInt,
    Float,
    Double,
    Decimal,
    Text,
    Bytes,
    Date,
    Time,
    DateTime,
    Timestamp,
    Json,
    Uuid,
}

impl Class {
    /// The class of a MariaDB/MySQL type, by sqlx's name for it.
    pub(crate) fn of_mysql(name: &str) -> Option<Class> {
        Some(match name {
            // TINYINT(1): read as the integer it is; a `bool` field takes it.
            "BOOLEAN" => Class::Int(1),
            "TINYINT" | "SMALLINT" | "MEDIUMINT" | "INT" | "BIGINT" => Class::Int(8),
            "TINYINT UNSIGNED" | "SMALLINT UNSIGNED" | "MEDIUMINT UNSIGNED" | "INT UNSIGNED"
            | "BIGINT UNSIGNED" => Class::UInt,
            "FLOAT" => Class::Float,
            "DOUBLE" => Class::Double,
            "DECIMAL" => Class::Decimal,
            "CHAR" | "VARCHAR" | "TINYTEXT" | "TEXT" | "MEDIUMTEXT" | "LONGTEXT" | "ENUM"
            | "SET" => Class::Text,
            "BINARY" | "VARBINARY" | "TINYBLOB" | "BLOB" | "MEDIUMBLOB" | "LONGBLOB" => {
                Class::Bytes
            }
            "DATE" => Class::Date,
            "TIME" => Class::Time,
            "DATETIME" => Class::DateTime,
            "TIMESTAMP" => Class::Timestamp,
            "JSON" => Class::Json,
            _ => return None,
        })
    }

    /// The class of a PostgreSQL type, by sqlx's name for it (`enum`:
    /// the type is an enum of the database's).
    pub(crate) fn of_postgres(name: &str, is_enum: bool) -> Option<Class> {
        if is_enum {
            return Some(Class::Text);
        }
        Some(match name {
            "BOOL" => Class::Bool,
            "INT2" => Class::Int(2),
            "INT4" => Class::Int(4),
            "INT8" => Class::Int(8),
            "FLOAT4" => Class::Float,
            "FLOAT8" => Class::Double,
            "NUMERIC" => Class::Decimal,
            "TEXT" | "VARCHAR" | "CHAR" | "NAME" | "citext" | "CITEXT" => Class::Text,
            "BYTEA" => Class::Bytes,
            "DATE" => Class::Date,
            "TIME" => Class::Time,
            "TIMESTAMP" => Class::DateTime,
            "TIMESTAMPTZ" => Class::Timestamp,
            "JSON" | "JSONB" => Class::Json,
            "UUID" => Class::Uuid,
            _ => return None,
        })
    }
}

impl Value {
    /// The value as an `i64`, for primary keys and integer index values.
    pub(crate) fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::UInt(u) => i64::try_from(*u).ok(),
            Value::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// The value as text, for text index values.
    pub(crate) fn as_text(&self) -> Option<&str> {
        match self {
            Value::Text(s) | Value::Decimal(s) | Value::Json(s) => Some(s),
            Value::Bytes(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    /// ISO 8601 text of dates and times (chrono's serde form); other
    /// values have none.
    pub(crate) fn iso(&self) -> Option<String> {
        Some(match self {
            Value::Date(d) => d.format("%Y-%m-%d").to_string(),
            Value::Time(t) => t.format("%H:%M:%S%.f").to_string(),
            Value::DateTime(t) => t.format("%Y-%m-%dT%H:%M:%S%.f").to_string(),
            Value::Timestamp(t) => t.format("%Y-%m-%dT%H:%M:%S%.fZ").to_string(),
            Value::Uuid(u) => u.hyphenated().to_string(),
            _ => return None,
        })
    }
}

macro_rules! from {
    ($($t:ty => $v:ident($conv:expr)),* $(,)?) => {
        $(impl From<$t> for Value {
            fn from(x: $t) -> Value {
                Value::$v($conv(x))
            }
        })*
    };
}

from! {
    bool => Bool(|x| x),
    i8 => Int(i64::from),
    i16 => Int(i64::from),
    i32 => Int(i64::from),
    i64 => Int(|x| x),
    u8 => UInt(u64::from),
    u16 => UInt(u64::from),
    u32 => UInt(u64::from),
    u64 => UInt(|x| x),
    f32 => Float(|x| x),
    f64 => Double(|x| x),
    String => Text(|x| x),
    &str => Text(str::to_string),
    Vec<u8> => Bytes(|x| x),
    NaiveDate => Date(|x| x),
    NaiveTime => Time(|x| x),
    NaiveDateTime => DateTime(|x| x),
    DateTime<Utc> => Timestamp(|x| x),
    uuid::Uuid => Uuid(|x| x),
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(x: Option<T>) -> Value {
        x.map_or(Value::Null, Into::into)
    }
}

/// The stored form of a value (postcard: a tag byte and varints): dates
/// and times as numbers, not text.
#[derive(Serialize, Deserialize)]
enum Stored {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f32),
    Double(f64),
    Decimal(String),
    Text(String),
    Bytes(Vec<u8>),
    /// Days from 0001-01-01 (day 1).
    Date(i32),
    /// Seconds from midnight, nanoseconds.
    Time(u32, u32),
    /// Seconds from the Unix epoch, nanoseconds.
    DateTime(i64, u32),
    Timestamp(i64, u32),
    Json(String),
    Uuid([u8; 16]),
}

impl Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use chrono::Datelike;
        let stored = match self {
            Value::Null => Stored::Null,
            Value::Bool(b) => Stored::Bool(*b),
            Value::Int(i) => Stored::Int(*i),
            Value::UInt(u) => Stored::UInt(*u),
            Value::Float(f) => Stored::Float(*f),
            Value::Double(f) => Stored::Double(*f),
            Value::Decimal(d) => Stored::Decimal(d.clone()),
            Value::Text(t) => Stored::Text(t.clone()),
            Value::Bytes(b) => Stored::Bytes(b.clone()),
            Value::Date(d) => Stored::Date(d.num_days_from_ce()),
            Value::Time(t) => Stored::Time(t.num_seconds_from_midnight(), t.nanosecond()),
            Value::DateTime(t) => {
                let u = t.and_utc();
                Stored::DateTime(u.timestamp(), u.timestamp_subsec_nanos())
            }
            Value::Timestamp(t) => Stored::Timestamp(t.timestamp(), t.timestamp_subsec_nanos()),
            Value::Json(j) => Stored::Json(j.clone()),
            Value::Uuid(u) => Stored::Uuid(*u.as_bytes()),
        };
        stored.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        use serde::de::Error;
        let bad = |what: &str| D::Error::custom(format!("stored {what} out of range"));
        Ok(match Stored::deserialize(d)? {
            Stored::Null => Value::Null,
            Stored::Bool(b) => Value::Bool(b),
            Stored::Int(i) => Value::Int(i),
            Stored::UInt(u) => Value::UInt(u),
            Stored::Float(f) => Value::Float(f),
            Stored::Double(f) => Value::Double(f),
            Stored::Decimal(d) => Value::Decimal(d),
            Stored::Text(t) => Value::Text(t),
            Stored::Bytes(b) => Value::Bytes(b),
            Stored::Date(n) => {
                Value::Date(NaiveDate::from_num_days_from_ce_opt(n).ok_or_else(|| bad("date"))?)
            }
            Stored::Time(s, n) => Value::Time(
                NaiveTime::from_num_seconds_from_midnight_opt(s, n).ok_or_else(|| bad("time"))?,
            ),
            Stored::DateTime(s, n) => Value::DateTime(
                DateTime::from_timestamp(s, n)
                    .ok_or_else(|| bad("datetime"))?
                    .naive_utc(),
            ),
            Stored::Timestamp(s, n) => {
                Value::Timestamp(DateTime::from_timestamp(s, n).ok_or_else(|| bad("timestamp"))?)
            }
            Stored::Json(j) => Value::Json(j),
            Stored::Uuid(b) => Value::Uuid(uuid::Uuid::from_bytes(b)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_survives_the_stored_form() {
        let d = NaiveDate::from_ymd_opt(2024, 2, 29).expect("date");
        let t = NaiveTime::from_hms_micro_opt(23, 59, 58, 123_456).expect("time");
        let values = vec![
            Value::Null,
            Value::Bool(true),
            Value::Int(-5),
            Value::UInt(u64::MAX),
            Value::Float(1.5),
            Value::Double(-0.1),
            Value::Decimal("-12.50".into()),
            Value::Text("é".into()),
            Value::Bytes(vec![0, 255]),
            Value::Date(d),
            Value::Time(t),
            Value::DateTime(d.and_time(t)),
            Value::Timestamp(d.and_time(t).and_utc()),
            Value::Json("{\"a\":[1]}".into()),
            Value::Uuid(uuid::Uuid::from_u128(0x1234)),
        ];
        let bytes = postcard::to_stdvec(&values).expect("encode");
        let back: Vec<Value> = postcard::from_bytes(&bytes).expect("decode");
        assert_eq!(back, values);
    }

    #[test]
    fn classes_of_both_databases() {
        assert_eq!(Class::of_mysql("BIGINT UNSIGNED"), Some(Class::UInt));
        assert_eq!(Class::of_mysql("BOOLEAN"), Some(Class::Int(1)));
        assert_eq!(Class::of_mysql("GEOMETRY"), None);
        assert_eq!(Class::of_postgres("INT2", false), Some(Class::Int(2)));
        assert_eq!(Class::of_postgres("mood", true), Some(Class::Text));
        assert_eq!(Class::of_postgres("INTERVAL", false), None);
    }
}
