//! `[normalize]`, `normalize_*` in rules, `[device]`: values and errors naming the line.

use crate::config::Config;

fn load(text: &str) -> Result<Config, String> {
    Config::from_toml(&format!("backend = \"http://127.0.0.1:1\"\n{text}"))
        .map_err(|e| e.to_string())
}

#[test]
fn defaults() {
    let config = load("").unwrap();
    let top = &config.routes[0].normalize;
    assert!(top.sort && !top.forward_removed);
    let names: Vec<&str> = top.remove.iter().map(|p| p.as_str()).collect();
    assert!(names.contains(&"utm_*") && names.contains(&"fbclid") && names.contains(&"_ga"));
    let device = config.keys.device.unwrap();
    assert_eq!(device.header, "x-device-class");
    assert_eq!(device.rules.len(), 2);
    assert!(!device.vary_user_agent);
    assert_eq!(config.keys.count_params, 256);
}

#[test]
fn top_level_and_rule_settings() {
    let config = load(
        "[normalize]\nalso_remove = [\"ref\"]\nforward_removed = true\ncount_params = 10\n\
         [device]\nheader = \"X-Class\"\ndefault = \"desktop\"\nvary_user_agent = true\n\
         [[device.rule]]\npattern = \"(?i)tablet\"\nclass = \"tab\"\n\
         [[rule]]\npath_prefix = \"/search\"\nnormalize_remove = [\"sid\"]\nnormalize_sort = false\n\
         [[rule]]\npath_prefix = \"/feed\"\nnormalize_also_remove = [\"x_*\"]\n",
    )
    .unwrap();
    let top = &config.routes[0].normalize;
    assert!(top.forward_removed);
    assert!(top.remove.iter().any(|p| p.matches("ref")));
    assert!(top.remove.iter().any(|p| p.matches("utm_source")));
    let search = &config.routes[1].normalize;
    assert_eq!(search.remove.len(), 1);
    assert!(search.remove[0].matches("sid") && !search.sort && search.forward_removed);
    let feed = &config.routes[2].normalize;
    assert!(feed.remove.iter().any(|p| p.matches("x_y")));
    assert!(feed.remove.iter().any(|p| p.matches("ref")));
    let device = config.keys.device.unwrap();
    assert_eq!(device.header, "x-class");
    assert_eq!(device.class(Some(b"A Tablet")), "tab");
    assert_eq!(device.class(Some(b"iPhone Mobile")), "desktop");
    assert!(device.vary_user_agent);
    assert_eq!(config.keys.count_params, 10);
    assert!(load("[device]\nenabled = false")
        .unwrap()
        .keys
        .device
        .is_none());
}

#[test]
fn mistakes_name_their_line() {
    for (text, line, says) in [
        ("[normalize]\nremove = [\"a=b\"]", 3, "normalize.remove"),
        (
            "[normalize]\nalso_remove = [\"ok\", \"\"]",
            3,
            "empty parameter pattern",
        ),
        (
            "[[rule]]\npath_prefix = \"/a\"\n\nnormalize_remove = [\"a b\"]",
            5,
            "normalize_remove",
        ),
        ("[device]\nheader = \"\"", 3, "device.header"),
        ("[device]\nheader = \"bad header\"", 3, "device.header"),
        ("[device]\nheader = \"User-Agent\"", 3, "device.header"),
        ("[device]\ndefault = \"p c\"", 3, "device.default"),
        (
            "[device]\n[[device.rule]]\npattern = \"(\"\nclass = \"x\"",
            4,
            "regular expression",
        ),
        ("[device]\n[[device.rule]]\nclass = \"x\"", 3, "contains"),
        (
            "[device]\n[[device.rule]]\ncontains = \"a\"\npattern = \"b\"\nclass = \"x\"",
            3,
            "contains",
        ),
    ] {
        let error = load(text).expect_err(text);
        assert!(
            error.contains(&format!("<text> line {line}: ")),
            "{text}: {error}"
        );
        assert!(error.contains(says), "{text}: {error}");
    }
    let unknown = load("[normalize]\nstrip = true").expect_err("unknown key");
    assert!(unknown.contains("strip"), "{unknown}");
}

/// The examples of docs/http.md's "Cache keys and device classes" are valid and mean what
/// the text says.
#[test]
fn the_documented_examples_parse() {
    let doc = include_str!("../../../../docs/http.md");
    let start = doc.find("### Cache keys and device classes").unwrap();
    let end = start + doc[start..].find("### Range requests").unwrap();
    let section = &doc[start..end];
    let blocks: Vec<&str> = section
        .split("```\n")
        .skip(1)
        .step_by(2)
        .filter(|b| b.contains(" = "))
        .collect();
    assert_eq!(blocks.len(), 2);
    let config = load(&blocks.concat()).unwrap();
    let top = &config.routes[0].normalize;
    assert!(top.remove.iter().any(|p| p.matches("from_x")));
    assert!(!top.remove.iter().any(|p| p.matches("fbclid")));
    let search = &config.routes[1].normalize;
    assert!(search.remove.iter().any(|p| p.matches("sid")));
    assert!(search.remove.iter().any(|p| p.matches("page_ref")));
    assert!(search.forward_removed && !search.sort);
    let device = config.keys.device.unwrap();
    assert_eq!(device.class(Some(b"Linux; Android 14 Mobile")), "sp");
    assert_eq!(device.class(Some(b"iPad")), "pc");
}
