//! PostgreSQL: reading each class of column into a [`Value`], and binding
//! values. Each integer width is read as its own type (the binary form
//! of `INT2` is two bytes); `NUMERIC` is read from its binary form into
//! exact text (`numeric.rs`); enums of the database are read as text.

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArgumentBuffer, PgArguments, PgRow, PgTypeInfo, PgTypeKind, PgValueFormat};
use sqlx::query::Query;
use sqlx::{Encode, Executor, Postgres, Row, Type, TypeInfo, ValueRef};

use super::{column_error, numeric};
use crate::value::{Class, Value};

pub(super) async fn fetch<'c, E>(e: E, sql: &str, args: &[Value]) -> Result<Vec<PgRow>, sqlx::Error>
where
    E: Executor<'c, Database = Postgres>,
{
    let mut q = sqlx::query(sql);
    for a in args {
        q = bind(q, a);
    }
    q.fetch_all(e).await
}

pub(super) async fn execute<'c, E>(e: E, sql: &str, args: &[Value]) -> Result<u64, sqlx::Error>
where
    E: Executor<'c, Database = Postgres>,
{
    let mut q = sqlx::query(sql);
    for a in args {
        q = bind(q, a);
    }
    Ok(q.execute(e).await?.rows_affected())
}

/// The class of a column's type.
pub(super) fn class(ti: &PgTypeInfo) -> Option<Class> {
    Class::of_postgres(ti.name(), matches!(ti.kind(), PgTypeKind::Enum(_)))
}

/// A `NUMERIC` parameter from decimal text.
struct Numeric(String);

impl Type<Postgres> for Numeric {
    fn type_info() -> PgTypeInfo {
        PgTypeInfo::with_name("NUMERIC")
    }
}

impl Encode<'_, Postgres> for Numeric {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        buf.extend_from_slice(&numeric::encode(&self.0)?);
        Ok(IsNull::No)
    }
}

fn bind<'q>(q: Query<'q, Postgres, PgArguments>, v: &Value) -> Query<'q, Postgres, PgArguments> {
    match v {
        Value::Null => q.bind(None::<i64>),
        Value::Bool(b) => q.bind(*b),
        Value::Int(i) => q.bind(*i),
        // PostgreSQL has no unsigned type: BIGINT up to i64::MAX, NUMERIC above.
        Value::UInt(u) => match i64::try_from(*u) {
            Ok(i) => q.bind(i),
            Err(_) => q.bind(Numeric(u.to_string())),
        },
        Value::Float(f) => q.bind(*f),
        Value::Double(f) => q.bind(*f),
        Value::Decimal(s) => q.bind(Numeric(s.clone())),
        Value::Text(s) => q.bind(s.clone()),
        Value::Json(s) => match serde_json::from_str::<serde_json::Value>(s) {
            Ok(j) => q.bind(sqlx::types::Json(j)),
            // Not JSON: the database says so.
            Err(_) => q.bind(s.clone()),
        },
        Value::Bytes(b) => q.bind(b.clone()),
        Value::Date(d) => q.bind(*d),
        Value::Time(t) => q.bind(*t),
        Value::DateTime(t) => q.bind(*t),
        Value::Timestamp(t) => q.bind(*t),
        Value::Uuid(u) => q.bind(*u),
    }
}

pub(super) fn values(row: &PgRow, classes: &[Class]) -> Result<Vec<Value>, String> {
    classes
        .iter()
        .enumerate()
        .map(|(i, c)| value(row, i, *c).map_err(|e| column_error(row, i, e)))
        .collect()
}

fn value(row: &PgRow, i: usize, class: Class) -> Result<Value, BoxDynError> {
    let raw = row.try_get_raw(i)?;
    if raw.is_null() {
        return Ok(Value::Null);
    }
    Ok(match class {
        Class::Bool => Value::Bool(row.try_get::<bool, _>(i)?),
        Class::Int(2) => Value::Int(i64::from(row.try_get::<i16, _>(i)?)),
        Class::Int(4) => Value::Int(i64::from(row.try_get::<i32, _>(i)?)),
        Class::Int(_) => Value::Int(row.try_get::<i64, _>(i)?),
        Class::UInt => Value::UInt(u64::try_from(row.try_get::<i64, _>(i)?)?),
        Class::Float => Value::Float(row.try_get::<f32, _>(i)?),
        Class::Double => Value::Double(row.try_get::<f64, _>(i)?),
        Class::Decimal => Value::Decimal(match raw.format() {
            PgValueFormat::Binary => numeric::decode(raw.as_bytes()?)?,
            PgValueFormat::Text => raw.as_str()?.to_string(),
        }),
        // Unchecked: enums and citext are text too.
        Class::Text => Value::Text(row.try_get_unchecked::<String, _>(i)?),
        Class::Json => Value::Json(row.try_get::<serde_json::Value, _>(i)?.to_string()),
        Class::Bytes => Value::Bytes(row.try_get::<Vec<u8>, _>(i)?),
        Class::Date => Value::Date(row.try_get::<NaiveDate, _>(i)?),
        Class::Time => Value::Time(row.try_get::<NaiveTime, _>(i)?),
        Class::DateTime => Value::DateTime(row.try_get::<NaiveDateTime, _>(i)?),
        Class::Timestamp => Value::Timestamp(row.try_get::<DateTime<Utc>, _>(i)?),
        Class::Uuid => Value::Uuid(row.try_get::<uuid::Uuid, _>(i)?),
    })
}
