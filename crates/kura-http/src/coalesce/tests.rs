use std::future::poll_fn;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

use super::*;

fn head(outcome: Outcome) -> Head {
    Head {
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        leader_vary: HeaderMap::new(),
        outcome,
    }
}

async fn read_all(reader: &mut Reader) -> Result<Vec<u8>, ()> {
    let mut out = Vec::new();
    while let Some(chunk) = poll_fn(|cx| reader.poll_chunk(cx)).await {
        out.extend_from_slice(&chunk?);
    }
    Ok(out)
}

#[tokio::test]
async fn one_leader_many_readers_and_the_whole_body_for_storing() {
    let flights = Arc::new(Flights::new(1 << 20, 1 << 20));
    let Join::Leader(flight) = flights.join(b"k") else {
        panic!("first is the leader")
    };
    let Join::Waiter(same) = flights.join(b"k") else {
        panic!("second waits")
    };
    assert!(Arc::ptr_eq(&flight, &same));
    let mut first = flight.reader().unwrap();
    let producer = Producer::new(flights.clone(), flight.clone());
    producer.head(head(Outcome::Shared));
    producer.push(Bytes::from_static(b"ab")).await;
    // A reader joining now still gets the body from its first byte.
    let mut late = flight.reader().unwrap();
    producer.push(Bytes::from_static(b"cd")).await;
    assert_eq!(flights.in_flight_bytes(), 4);
    let whole = producer.whole(true, None).unwrap();
    assert_eq!(whole.concat(), b"abcd");
    producer.finish(true);
    assert_eq!(flights.in_flight_bytes(), 0);
    assert!(!flights.busy(b"k"), "a finished flight takes no one new");
    assert_eq!(read_all(&mut first).await.unwrap(), b"abcd");
    assert_eq!(read_all(&mut late).await.unwrap(), b"abcd");
}

#[tokio::test]
async fn past_the_object_limit_the_body_is_not_kept() {
    let flights = Arc::new(Flights::new(1 << 30, 8));
    let Join::Leader(flight) = flights.join(b"k") else {
        panic!()
    };
    let mut reader = flight.reader().unwrap();
    let producer = Producer::new(flights.clone(), flight.clone());
    producer.head(head(Outcome::Shared));
    producer.push(Bytes::from_static(b"12345")).await;
    producer.push(Bytes::from_static(b"67890")).await;
    assert!(!flights.busy(b"k"), "closed to new readers");
    assert_eq!(
        poll_fn(|cx| reader.poll_chunk(cx)).await.unwrap().unwrap(),
        "12345"
    );
    producer.push(Bytes::from_static(b"x")).await;
    // The chunk every reader passed is dropped; a new reader cannot start from byte 0.
    assert!(flight.reader().is_none());
    assert!(producer.whole(true, None).is_none(), "nothing to store");
    producer.finish(true);
    assert_eq!(read_all(&mut reader).await.unwrap(), b"67890x");
}

#[tokio::test]
async fn a_slow_reader_holds_the_fetch_back_by_a_window() {
    let flights = Arc::new(Flights::new(1 << 30, 1));
    let Join::Leader(flight) = flights.join(b"k") else {
        panic!()
    };
    let mut reader = flight.reader().unwrap();
    let producer = Producer::new(flights.clone(), flight.clone());
    producer.head(head(Outcome::Private));
    let chunk = Bytes::from(vec![0u8; 256 * 1024]);
    let feeding = tokio::spawn(async move {
        for _ in 0..16 {
            producer.push(chunk.clone()).await;
        }
        producer.finish(true);
    });
    // The producer cannot run more than WINDOW (plus one chunk) ahead of the reader.
    let mut total = 0;
    while let Some(chunk) = poll_fn(|cx| reader.poll_chunk(cx)).await {
        total += chunk.unwrap().len();
        let buffered = flight.state.lock().buffered;
        assert!(buffered <= WINDOW + 256 * 1024, "{buffered}");
    }
    feeding.await.unwrap();
    assert_eq!(total, 16 * 256 * 1024);
}

#[tokio::test]
async fn failures_reach_the_readers() {
    let flights = Arc::new(Flights::new(1 << 20, 1 << 20));
    let Join::Leader(flight) = flights.join(b"k") else {
        panic!()
    };
    let reader = flight.reader().unwrap();
    drop(Producer::new(flights.clone(), flight.clone()));
    assert!(matches!(
        reader.head().await,
        ReadHead::Failed(FetchError::Garbage)
    ));
    assert!(!flights.busy(b"k"));

    let Join::Leader(flight) = flights.join(b"k") else {
        panic!()
    };
    let mut reader = flight.reader().unwrap();
    let producer = Producer::new(flights.clone(), flight.clone());
    producer.head(head(Outcome::Shared));
    producer.push(Bytes::from_static(b"part")).await;
    drop(producer);
    assert!(
        read_all(&mut reader).await.is_err(),
        "a body cut short is an error"
    );
    assert_eq!(flights.in_flight_bytes(), 0);
}
