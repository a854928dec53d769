//! Ranges of ids in interval notation: `[10,20)`, `(10,20]`, `[10,20]`,
//! `(10,20)`, with `min` and `max` standing for the smallest and largest id
//! present (Tokyo Cabinet's special ids).

use std::str::FromStr;

/// One end of a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Id(u64),
    /// The smallest id present.
    Min,
    /// The largest id present.
    Max,
}

/// A range of ids: both ends and whether each is included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeSpec {
    pub lo: End,
    pub lo_inclusive: bool,
    pub hi: End,
    pub hi_inclusive: bool,
}

/// Why a range does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("a range starts with [ or ( and ends with ] or )")]
    Brackets,
    #[error("a range has two ends separated by a comma")]
    Comma,
    #[error("a range end is an id (1, 2, ...), min or max: {0:?}")]
    End(String),
}

fn end(s: &str) -> Result<End, RangeError> {
    match s.trim() {
        "min" => Ok(End::Min),
        "max" => Ok(End::Max),
        t => t
            .parse::<u64>()
            .map(End::Id)
            .map_err(|_| RangeError::End(t.to_owned())),
    }
}

impl FromStr for RangeSpec {
    type Err = RangeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let b = s.as_bytes();
        let (Some(&open), Some(&close)) = (b.first(), b.last()) else {
            return Err(RangeError::Brackets);
        };
        let lo_inclusive = match open {
            b'[' => true,
            b'(' => false,
            _ => return Err(RangeError::Brackets),
        };
        let hi_inclusive = match close {
            b']' => true,
            b')' => false,
            _ => return Err(RangeError::Brackets),
        };
        if s.len() < 2 {
            return Err(RangeError::Brackets);
        }
        let inner = &s[1..s.len() - 1];
        let (lo, hi) = inner.split_once(',').ok_or(RangeError::Comma)?;
        Ok(RangeSpec {
            lo: end(lo)?,
            lo_inclusive,
            hi: end(hi)?,
            hi_inclusive,
        })
    }
}

impl std::fmt::Display for RangeSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let end = |e: End| match e {
            End::Id(n) => n.to_string(),
            End::Min => "min".into(),
            End::Max => "max".into(),
        };
        write!(
            f,
            "{}{},{}{}",
            if self.lo_inclusive { '[' } else { '(' },
            end(self.lo),
            end(self.hi),
            if self.hi_inclusive { ']' } else { ')' }
        )
    }
}

impl RangeSpec {
    /// `[min,max]`: every record present.
    pub fn all() -> RangeSpec {
        RangeSpec {
            lo: End::Min,
            lo_inclusive: true,
            hi: End::Max,
            hi_inclusive: true,
        }
    }

    /// The inclusive ids `lo..=hi` this range covers, given the smallest
    /// and largest ids present; `None` when it covers none.
    pub fn resolve(&self, min: Option<u64>, max: Option<u64>) -> Option<(u64, u64)> {
        let at = |e: End| match e {
            End::Id(n) => Some(n),
            End::Min => min,
            End::Max => max,
        };
        let mut lo = at(self.lo)?;
        let mut hi = at(self.hi)?;
        if !self.lo_inclusive {
            lo = lo.checked_add(1)?;
        }
        if !self.hi_inclusive {
            hi = hi.checked_sub(1)?;
        }
        (lo.max(1) <= hi).then_some((lo.max(1), hi))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notations() {
        let r: RangeSpec = "[10,20)".parse().unwrap();
        assert_eq!(r.resolve(None, None), Some((10, 19)));
        let r: RangeSpec = "(10,20]".parse().unwrap();
        assert_eq!(r.resolve(None, None), Some((11, 20)));
        let r: RangeSpec = "[10,20]".parse().unwrap();
        assert_eq!(r.resolve(None, None), Some((10, 20)));
        let r: RangeSpec = "(10,11)".parse().unwrap();
        assert_eq!(r.resolve(None, None), None);
        let r: RangeSpec = "[min,max]".parse().unwrap();
        assert_eq!(r.resolve(Some(3), Some(9)), Some((3, 9)));
        assert_eq!(r.resolve(None, None), None);
        let r: RangeSpec = "(min, 5]".parse().unwrap();
        assert_eq!(r.resolve(Some(3), Some(9)), Some((4, 5)));
        assert_eq!(r.to_string(), "(min,5]");
        let r: RangeSpec = "[0,0]".parse().unwrap();
        assert_eq!(r.resolve(None, None), None, "ids start at 1");
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert_eq!("10,20".parse::<RangeSpec>(), Err(RangeError::Brackets));
        assert_eq!("[10 20]".parse::<RangeSpec>(), Err(RangeError::Comma));
        assert_eq!(
            "[a,20]".parse::<RangeSpec>(),
            Err(RangeError::End("a".into()))
        );
        assert_eq!("[".parse::<RangeSpec>(), Err(RangeError::Brackets));
        assert_eq!("".parse::<RangeSpec>(), Err(RangeError::Brackets));
    }
}
