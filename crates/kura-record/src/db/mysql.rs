//! MariaDB/MySQL: reading each class of column into a [`Value`], and
//! binding values. Columns are read without sqlx's type check
//! (`try_get_unchecked`): the class was chosen from the column's type, and
//! sqlx's checks refuse what the class reads on purpose (a `DECIMAL` as
//! text, a `TINYINT(1)` as an integer).

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use sqlx::mysql::{MySqlArguments, MySqlRow};
use sqlx::query::Query;
use sqlx::{Executor, MySql, Row, ValueRef};

use super::column_error;
use crate::value::{Class, Value};

pub(super) async fn fetch<'c, E>(
    e: E,
    sql: &str,
    args: &[Value],
) -> Result<Vec<MySqlRow>, sqlx::Error>
where
    E: Executor<'c, Database = MySql>,
{
    let mut q = sqlx::query(sql);
    for a in args {
        q = bind(q, a);
    }
    q.fetch_all(e).await
}

pub(super) async fn execute<'c, E>(e: E, sql: &str, args: &[Value]) -> Result<u64, sqlx::Error>
where
    E: Executor<'c, Database = MySql>,
{
    let mut q = sqlx::query(sql);
    for a in args {
        q = bind(q, a);
    }
    Ok(q.execute(e).await?.rows_affected())
}

fn bind<'q>(q: Query<'q, MySql, MySqlArguments>, v: &Value) -> Query<'q, MySql, MySqlArguments> {
    match v {
        Value::Null => q.bind(None::<String>),
        Value::Bool(b) => q.bind(*b),
        Value::Int(i) => q.bind(*i),
        Value::UInt(u) => q.bind(*u),
        Value::Float(f) => q.bind(*f),
        Value::Double(f) => q.bind(*f),
        Value::Decimal(s) | Value::Text(s) | Value::Json(s) => q.bind(s.clone()),
        Value::Bytes(b) => q.bind(b.clone()),
        Value::Date(d) => q.bind(*d),
        Value::Time(t) => q.bind(*t),
        Value::DateTime(t) => q.bind(*t),
        Value::Timestamp(t) => q.bind(*t),
        Value::Uuid(u) => q.bind(u.hyphenated().to_string()),
    }
}

pub(super) fn values(row: &MySqlRow, classes: &[Class]) -> Result<Vec<Value>, String> {
    classes
        .iter()
        .enumerate()
        .map(|(i, c)| value(row, i, *c).map_err(|e| column_error(row, i, e)))
        .collect()
}

fn value(row: &MySqlRow, i: usize, class: Class) -> Result<Value, sqlx::Error> {
    if row.try_get_raw(i)?.is_null() {
        return Ok(Value::Null);
    }
    Ok(match class {
        Class::Bool => Value::Bool(row.try_get_unchecked::<bool, _>(i)?),
        Class::Int(_) => Value::Int(row.try_get_unchecked::<i64, _>(i)?),
        Class::UInt => Value::UInt(row.try_get_unchecked::<u64, _>(i)?),
        Class::Float => Value::Float(row.try_get_unchecked::<f32, _>(i)?),
        Class::Double => Value::Double(row.try_get_unchecked::<f64, _>(i)?),
        Class::Decimal => Value::Decimal(row.try_get_unchecked::<String, _>(i)?),
        Class::Text => Value::Text(row.try_get_unchecked::<String, _>(i)?),
        Class::Json => Value::Json(row.try_get_unchecked::<String, _>(i)?),
        Class::Bytes => Value::Bytes(row.try_get_unchecked::<Vec<u8>, _>(i)?),
        Class::Date => Value::Date(row.try_get_unchecked::<NaiveDate, _>(i)?),
        Class::Time => Value::Time(row.try_get_unchecked::<NaiveTime, _>(i)?),
        Class::DateTime => Value::DateTime(row.try_get_unchecked::<NaiveDateTime, _>(i)?),
        // sqlx sets the session's time zone to UTC: a TIMESTAMP arrives
        // as its UTC time.
        Class::Timestamp => {
            Value::Timestamp(row.try_get_unchecked::<NaiveDateTime, _>(i)?.and_utc())
        }
        Class::Uuid => Value::Uuid(row.try_get_unchecked::<uuid::Uuid, _>(i)?),
    })
}
