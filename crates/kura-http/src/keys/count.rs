//! Counting the query parameter names clients send, so that an operator can see which ones to
//! leave out of the key (seed 002 counted them in its access logs). Memory is bounded: at
//! most `capacity` names are tracked, by the Space-Saving algorithm (Metwally et al., 2005):
//! a new name when the table is full takes the place of the least counted one and inherits
//! its count plus one, so a name's count is never under its true count and over it by at most
//! the count it inherited (shown as `error`). Names are cut to [`NAME_MAX`] bytes.

use std::collections::HashMap;

use parking_lot::Mutex;

use super::query::{normalise_percent, param_name};

/// Longest name kept (longer ones are cut).
pub const NAME_MAX: usize = 64;

#[derive(Debug, Clone, Copy)]
struct Count {
    count: u64,
    error: u64,
}

/// The most frequent parameter names.
#[derive(Debug)]
pub struct ParamCounter {
    capacity: usize,
    names: Mutex<HashMap<Box<str>, Count>>,
}

/// One counted name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameCount {
    /// The name (percent-normalised, at most [`NAME_MAX`] bytes).
    pub name: String,
    /// Requests that carried it (an over-estimate by at most `error`).
    pub count: u64,
    /// The count inherited from the name it replaced.
    pub error: u64,
}

impl ParamCounter {
    /// A counter of at most `capacity` names (0: counting is off).
    pub fn new(capacity: usize) -> ParamCounter {
        ParamCounter {
            capacity,
            names: Mutex::new(HashMap::with_capacity(capacity.min(1024))),
        }
    }

    /// Counts the parameter names of `query` (each name once per request).
    pub fn count_query(&self, query: &str) {
        if self.capacity == 0 || query.is_empty() {
            return;
        }
        let normal = normalise_percent(query);
        let mut names: Vec<&str> = normal
            .split('&')
            .map(param_name)
            .filter(|n| !n.is_empty())
            .map(|n| &n[..n.len().min(NAME_MAX)])
            .collect();
        names.sort_unstable();
        names.dedup();
        let mut table = self.names.lock();
        for name in names {
            if let Some(count) = table.get_mut(name) {
                count.count += 1;
                continue;
            }
            if table.len() < self.capacity {
                table.insert(name.into(), Count { count: 1, error: 0 });
                continue;
            }
            let least = table
                .iter()
                .min_by_key(|(_, c)| c.count)
                .map(|(n, c)| (n.clone(), c.count));
            if let Some((least, count)) = least {
                table.remove(&least);
                table.insert(
                    name.into(),
                    Count {
                        count: count + 1,
                        error: count,
                    },
                );
            }
        }
    }

    /// The names counted, most frequent first (ties by name).
    pub fn top(&self) -> Vec<NameCount> {
        let table = self.names.lock();
        let mut out: Vec<NameCount> = table
            .iter()
            .map(|(name, c)| NameCount {
                name: name.to_string(),
                count: c.count,
                error: c.error,
            })
            .collect();
        drop(table);
        out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
        out
    }

    /// The `/stats` entry: `[{"name": ..., "count": ..., "error": ...}, ...]`.
    pub fn json(&self) -> serde_json::Value {
        self.top()
            .into_iter()
            .map(|n| serde_json::json!({ "name": n.name, "count": n.count, "error": n.error }))
            .collect()
    }

    /// The `/stats` page `json` (an object) with `query_params` added.
    pub fn add_to_json(&self, json: String) -> String {
        match serde_json::from_str::<serde_json::Value>(&json) {
            Ok(serde_json::Value::Object(mut page)) => {
                page.insert("query_params".into(), self.json());
                serde_json::Value::Object(page).to_string()
            }
            _ => json,
        }
    }

    /// The `/metrics` lines.
    pub fn prometheus(&self) -> String {
        let mut out = String::from(
            "# HELP kura_http_query_param_requests Requests carrying the query parameter (most frequent names; an over-estimate by at most kura_http_query_param_error).\n\
             # TYPE kura_http_query_param_requests gauge\n",
        );
        let top = self.top();
        for n in &top {
            out.push_str(&format!(
                "kura_http_query_param_requests{{name=\"{}\"}} {}\n",
                escape_label(&n.name),
                n.count
            ));
        }
        out.push_str("# TYPE kura_http_query_param_error gauge\n");
        for n in &top {
            out.push_str(&format!(
                "kura_http_query_param_error{{name=\"{}\"}} {}\n",
                escape_label(&n.name),
                n.error
            ));
        }
        out
    }
}

/// A Prometheus label value: `\`, `"` and line feeds escaped.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(counter: &ParamCounter) -> Vec<(String, u64)> {
        counter
            .top()
            .into_iter()
            .map(|n| (n.name, n.count))
            .collect()
    }

    #[test]
    fn names_are_counted_once_per_request() {
        let counter = ParamCounter::new(10);
        counter.count_query("utm_source=a&id=1&utm_source=b");
        counter.count_query("id=2&utm%5Fsource=c&flag");
        counter.count_query("id=3");
        counter.count_query("");
        assert_eq!(
            counts(&counter),
            [
                ("id".into(), 3),
                ("utm_source".into(), 2),
                ("flag".into(), 1)
            ]
        );
    }

    #[test]
    fn memory_is_bounded_and_frequent_names_survive() {
        let counter = ParamCounter::new(8);
        for round in 0..1000 {
            counter.count_query("page=1&utm_source=x");
            counter.count_query(&format!("random{round}=1"));
        }
        let top = counter.top();
        assert_eq!(top.len(), 8);
        assert_eq!(top[0].name, "page");
        assert_eq!((top[0].count, top[0].error), (1000, 0));
        assert_eq!(top[1].name, "utm_source");
        assert!(top[2..].iter().all(|n| n.count >= n.error));
        let long = "x".repeat(500);
        counter.count_query(&format!("{long}=1"));
        assert!(counter.top().iter().all(|n| n.name.len() <= NAME_MAX));
    }

    #[test]
    fn off_and_pages() {
        let off = ParamCounter::new(0);
        off.count_query("a=1");
        assert!(off.top().is_empty());
        let counter = ParamCounter::new(4);
        counter.count_query("a\"b=1&c=2");
        let page = counter.prometheus();
        assert!(page.contains("kura_http_query_param_requests{name=\"a\\\"b\"} 1\n"));
        assert!(page.contains("kura_http_query_param_error{name=\"c\"} 0\n"));
        assert_eq!(counter.json()[0]["count"], 1);
    }
}
