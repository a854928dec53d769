//! The rows of the type round-trip test (tests/types.rs): each table's row
//! as the application reads it through kura-record, and as sqlx's own
//! driver reads it, with the conversion between them.

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use kura_record::{Json, Record};
use serde::Deserialize;

/// A row of the MariaDB table, as the application reads it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MyRow {
    pub id: i64,
    pub ti: Option<i8>,
    pub si: Option<i16>,
    pub mi: Option<i32>,
    pub i: Option<i32>,
    pub bi: Option<i64>,
    pub tu: Option<u8>,
    pub su: Option<u16>,
    pub iu: Option<u32>,
    pub bu: Option<u64>,
    pub flag: Option<bool>,
    pub price: Option<String>,
    pub f: Option<f32>,
    pub d: Option<f64>,
    pub c: Option<String>,
    pub vc: Option<String>,
    pub txt: Option<String>,
    pub vb: Option<Vec<u8>>,
    pub bl: Option<Vec<u8>>,
    pub day: Option<NaiveDate>,
    pub tm: Option<NaiveTime>,
    pub dt: Option<NaiveDateTime>,
    pub ts: Option<DateTime<Utc>>,
    pub js: Option<Json<serde_json::Value>>,
    pub en: Option<String>,
    pub uid: Option<uuid::Uuid>,
}

impl Record for MyRow {
    fn id(&self) -> i64 {
        self.id
    }
}

/// The same row read by sqlx's MySQL driver (DECIMAL and UUID cast to
/// text, which sqlx does not read into a String).
#[derive(Debug)]
pub struct MyDirect {
    pub id: i64,
    pub ti: Option<i8>,
    pub si: Option<i16>,
    pub mi: Option<i32>,
    pub i: Option<i32>,
    pub bi: Option<i64>,
    pub tu: Option<u8>,
    pub su: Option<u16>,
    pub iu: Option<u32>,
    pub bu: Option<u64>,
    pub flag: Option<bool>,
    pub price: Option<String>,
    pub f: Option<f32>,
    pub d: Option<f64>,
    pub c: Option<String>,
    pub vc: Option<String>,
    pub txt: Option<String>,
    pub vb: Option<Vec<u8>>,
    pub bl: Option<Vec<u8>>,
    pub day: Option<NaiveDate>,
    pub tm: Option<NaiveTime>,
    pub dt: Option<NaiveDateTime>,
    pub ts: Option<DateTime<Utc>>,
    pub js: Option<String>,
    pub en: Option<String>,
    pub uid: Option<String>,
}

crate::from_row!(sqlx::mysql::MySqlRow => MyDirect {
    id,
    ti,
    si,
    mi,
    i,
    bi,
    tu,
    su,
    iu,
    bu,
    flag,
    price,
    f,
    d,
    c,
    vc,
    txt,
    vb,
    bl,
    day,
    tm,
    dt,
    ts,
    js,
    en,
    uid
});

impl From<MyDirect> for MyRow {
    fn from(r: MyDirect) -> MyRow {
        MyRow {
            id: r.id,
            ti: r.ti,
            si: r.si,
            mi: r.mi,
            i: r.i,
            bi: r.bi,
            tu: r.tu,
            su: r.su,
            iu: r.iu,
            bu: r.bu,
            flag: r.flag,
            price: r.price,
            f: r.f,
            d: r.d,
            c: r.c,
            vc: r.vc,
            txt: r.txt,
            vb: r.vb,
            bl: r.bl,
            day: r.day,
            tm: r.tm,
            dt: r.dt,
            ts: r.ts,
            js: r.js.map(|j| Json(serde_json::from_str(&j).expect("JSON"))),
            en: r.en,
            uid: r.uid.map(|u| u.parse().expect("a UUID")),
        }
    }
}

/// A row of the PostgreSQL table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PgRow {
    pub id: i64,
    pub si: Option<i16>,
    pub i: Option<i32>,
    pub bi: Option<i64>,
    pub flag: Option<bool>,
    pub price: Option<String>,
    pub big: Option<String>,
    pub f: Option<f32>,
    pub d: Option<f64>,
    pub c: Option<String>,
    pub vc: Option<String>,
    pub txt: Option<String>,
    pub bl: Option<Vec<u8>>,
    pub day: Option<NaiveDate>,
    pub tm: Option<NaiveTime>,
    pub ts: Option<NaiveDateTime>,
    pub tz: Option<DateTime<Utc>>,
    pub js: Option<serde_json::Value>,
    pub jb: Option<serde_json::Value>,
    pub uid: Option<uuid::Uuid>,
    pub en: Option<String>,
}

impl Record for PgRow {
    fn id(&self) -> i64 {
        self.id
    }
}

/// The same row read by sqlx's PostgreSQL driver (NUMERIC and the enum
/// cast to text).
#[derive(Debug)]
pub struct PgDirect {
    pub id: i64,
    pub si: Option<i16>,
    pub i: Option<i32>,
    pub bi: Option<i64>,
    pub flag: Option<bool>,
    pub price: Option<String>,
    pub big: Option<String>,
    pub f: Option<f32>,
    pub d: Option<f64>,
    pub c: Option<String>,
    pub vc: Option<String>,
    pub txt: Option<String>,
    pub bl: Option<Vec<u8>>,
    pub day: Option<NaiveDate>,
    pub tm: Option<NaiveTime>,
    pub ts: Option<NaiveDateTime>,
    pub tz: Option<DateTime<Utc>>,
    pub js: Option<serde_json::Value>,
    pub jb: Option<serde_json::Value>,
    pub uid: Option<uuid::Uuid>,
    pub en: Option<String>,
}

crate::from_row!(sqlx::postgres::PgRow => PgDirect {
    id,
    si,
    i,
    bi,
    flag,
    price,
    big,
    f,
    d,
    c,
    vc,
    txt,
    bl,
    day,
    tm,
    ts,
    tz,
    js,
    jb,
    uid,
    en
});

impl From<PgDirect> for PgRow {
    fn from(r: PgDirect) -> PgRow {
        PgRow {
            id: r.id,
            si: r.si,
            i: r.i,
            bi: r.bi,
            flag: r.flag,
            price: r.price,
            big: r.big,
            f: r.f,
            d: r.d,
            c: r.c,
            vc: r.vc,
            txt: r.txt,
            bl: r.bl,
            day: r.day,
            tm: r.tm,
            ts: r.ts,
            tz: r.tz,
            js: r.js,
            jb: r.jb,
            uid: r.uid,
            en: r.en,
        }
    }
}
