//! A stored response's age (RFC 9111 §4.2.3, the `Age` field §5.1).
//!
//! The age is fixed when the response arrives (`corrected_initial_age`, from its `Age` and
//! `Date` and the request and response times) and then grows with the time it spends in the
//! cache (`resident_time`). Times are [`SystemTime`]s passed in; a time that runs backwards
//! (a clock step) counts as zero, never as a negative age, and sums saturate at 2^31 seconds
//! (§1.2.2).

use std::time::{Duration, SystemTime};

use http::header::{AGE, DATE};
use http::HeaderMap;

use super::dates;
use super::delta::{self, DELTA_SECONDS_MAX};

const AGE_MAX: Duration = Duration::from_secs(DELTA_SECONDS_MAX);

/// `age_value`: the response's `Age` field in seconds, 0 when absent or unusable.
///
/// `Age` is a single delta-seconds. A list (`Age: 10, 20`, or several lines) is read as its
/// first member, as a sender may have joined repeated lines (RFC 9110 §5.3); a first member that
/// is not delta-seconds (`-5`, `1.5`, `x`) makes the field unusable, and unusable is 0.
pub fn age_value(headers: &HeaderMap) -> Duration {
    let Some(first) = headers.get(AGE) else {
        return Duration::ZERO;
    };
    let bytes = first.as_bytes();
    let member = bytes.split(|&b| b == b',').next().unwrap_or(bytes);
    delta::parse(member.trim_ascii()).map_or(Duration::ZERO, delta::to_duration)
}

/// `a - b`, or zero when `b` is later.
fn since(a: SystemTime, b: SystemTime) -> Duration {
    a.duration_since(b).unwrap_or(Duration::ZERO)
}

/// `corrected_initial_age` (§4.2.3):
///
/// ```text
/// apparent_age          = max(0, response_time - date_value)
/// response_delay        = response_time - request_time
/// corrected_age_value   = age_value + response_delay
/// corrected_initial_age = max(apparent_age, corrected_age_value)
/// ```
///
/// `date_value` is `None` when the response had no valid `Date`; it is then taken as
/// `response_time` (RFC 9110 §6.6.1: a recipient records the time it received the message).
pub fn corrected_initial_age(
    age_value: Duration,
    date_value: Option<SystemTime>,
    request_time: SystemTime,
    response_time: SystemTime,
) -> Duration {
    let apparent_age = date_value.map_or(Duration::ZERO, |date| since(response_time, date));
    let response_delay = since(response_time, request_time);
    let corrected_age_value = age_value.saturating_add(response_delay);
    apparent_age.max(corrected_age_value).min(AGE_MAX)
}

/// `corrected_initial_age` from a response's own `Age` and `Date` fields.
pub fn initial_age(
    headers: &HeaderMap,
    request_time: SystemTime,
    response_time: SystemTime,
) -> Duration {
    let date = dates::read(headers, &DATE).valid();
    corrected_initial_age(age_value(headers), date, request_time, response_time)
}

/// `current_age = corrected_initial_age + resident_time`, where
/// `resident_time = now - response_time` (§4.2.3).
pub fn current_age(
    corrected_initial_age: Duration,
    response_time: SystemTime,
    now: SystemTime,
) -> Duration {
    corrected_initial_age
        .saturating_add(since(now, response_time))
        .min(AGE_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use proptest::prelude::*;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    fn secs(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    fn with_age(values: &[&'static str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(AGE, HeaderValue::from_static(value));
        }
        headers
    }

    // RFC 9111 §5.1: Age = delta-seconds; absent is 0.
    #[test]
    fn age_field() {
        assert_eq!(age_value(&HeaderMap::new()), Duration::ZERO);
        assert_eq!(age_value(&with_age(&["30"])), secs(30));
        assert_eq!(age_value(&with_age(&[" 30 "])), secs(30));
        assert_eq!(age_value(&with_age(&["10, 20"])), secs(10));
        assert_eq!(age_value(&with_age(&["10", "20"])), secs(10));
    }

    // Bad Age values are unusable (0), and huge ones are 2^31 (§1.2.2).
    #[test]
    fn bad_age_field() {
        for bad in ["-5", "1.5", "x", "", "1e3"] {
            assert_eq!(age_value(&with_age(&[bad])), Duration::ZERO, "{bad}");
        }
        assert_eq!(
            age_value(&with_age(&["99999999999999999999999"])),
            secs(DELTA_SECONDS_MAX)
        );
    }

    // RFC 9111 §4.2.3: the worked formula.
    #[test]
    fn corrected_initial_age_formula() {
        // Date 10 s before receipt, Age 3, 2 s round trip: max(10, 3 + 2) = 10.
        assert_eq!(
            corrected_initial_age(secs(3), Some(at(90)), at(98), at(100)),
            secs(10)
        );
        // Age dominates: max(1, 30 + 2) = 32.
        assert_eq!(
            corrected_initial_age(secs(30), Some(at(99)), at(98), at(100)),
            secs(32)
        );
    }

    // apparent_age = max(0, response_time - date_value): a Date in the future counts as 0.
    #[test]
    fn future_date_is_zero_apparent_age() {
        assert_eq!(
            corrected_initial_age(Duration::ZERO, Some(at(500)), at(100), at(100)),
            Duration::ZERO
        );
    }

    // RFC 9110 §6.6.1: no Date -> the receipt time, so apparent_age 0.
    #[test]
    fn missing_date() {
        assert_eq!(
            corrected_initial_age(secs(4), None, at(99), at(100)),
            secs(5)
        );
        let mut headers = with_age(&["4"]);
        headers.insert(DATE, HeaderValue::from_static("garbage"));
        assert_eq!(initial_age(&headers, at(99), at(100)), secs(5));
    }

    // A request time after the response time (clock step) is no negative delay.
    #[test]
    fn clock_steps_are_not_negative() {
        assert_eq!(
            corrected_initial_age(secs(1), None, at(200), at(100)),
            secs(1)
        );
        assert_eq!(current_age(secs(7), at(100), at(50)), secs(7));
    }

    // RFC 9111 §4.2.3: current_age = corrected_initial_age + resident_time.
    #[test]
    fn current_age_grows_with_residence() {
        assert_eq!(current_age(secs(10), at(100), at(100)), secs(10));
        assert_eq!(current_age(secs(10), at(100), at(160)), secs(70));
    }

    // RFC 9111 §1.2.2: overflowing calculations become 2^31.
    #[test]
    fn overflow_is_capped() {
        let huge = Duration::from_secs(u64::MAX / 2);
        assert_eq!(
            corrected_initial_age(huge, None, at(0), at(u64::MAX / 4)),
            secs(DELTA_SECONDS_MAX)
        );
        assert_eq!(
            current_age(secs(DELTA_SECONDS_MAX), at(0), at(1 << 40)),
            secs(DELTA_SECONDS_MAX)
        );
    }

    proptest! {
        // The age never decreases as time goes on, and never drops below the initial age.
        #[test]
        fn current_age_is_monotonic(
            age in 0u64..1 << 33,
            date in 0u64..1 << 34,
            request in 0u64..1 << 34,
            response in 0u64..1 << 34,
            now in 0u64..1 << 34,
            later in 0u64..1 << 34,
        ) {
            let initial = corrected_initial_age(secs(age), Some(at(date)), at(request), at(response));
            let first = current_age(initial, at(response), at(now));
            let second = current_age(initial, at(response), at(now.saturating_add(later)));
            prop_assert!(second >= first);
            prop_assert!(first >= initial);
            prop_assert!(first <= secs(DELTA_SECONDS_MAX));
        }

        // The initial age is at least the Age field and at least the apparent age (capped).
        #[test]
        fn initial_age_bounds(
            age in 0u64..1 << 32,
            date in 0u64..1 << 34,
            request in 0u64..1 << 34,
            response in 0u64..1 << 34,
        ) {
            let initial = corrected_initial_age(secs(age), Some(at(date)), at(request), at(response));
            let cap = secs(DELTA_SECONDS_MAX);
            prop_assert!(initial >= secs(age).min(cap));
            prop_assert!(initial >= at(response).duration_since(at(date)).unwrap_or_default().min(cap));
        }
    }
}
