use super::*;

/// The page with every include written as `[src]` (`[src!]` for onerror="continue").
fn render(page: &str) -> Option<String> {
    let segments = parse(page.as_bytes())?;
    let mut out = String::new();
    for segment in segments {
        match segment {
            Segment::Text(start, end) => out.push_str(&page[start..end]),
            Segment::Include(src, onerror) => {
                out.push('[');
                out.push_str(&src);
                if onerror {
                    out.push('!');
                }
                out.push(']');
            }
        }
    }
    Some(out)
}

#[test]
fn includes_in_their_forms() {
    assert_eq!(
        render(r#"<p>a<esi:include src="/x"/>b<esi:include src='/y' onerror="continue" />c</p>"#)
            .unwrap(),
        "<p>a[/x]b[/y!]c</p>"
    );
    assert_eq!(
        render(
            r#"<p><esi:include src="/x"></esi:include>|<ESI:INCLUDE SRC=/z>  </esi:include></p>"#
        )
        .unwrap(),
        "<p>[/x]|[/z]</p>"
    );
    assert_eq!(
        render(r#"<p><esi:include src="/q?a=1&amp;b=2" alt="/alt"/></p>"#).unwrap(),
        "<p>[/q?a=1&b=2]</p>"
    );
    // No src: the tag goes, nothing is included.
    assert_eq!(render("<p><esi:include/>.</p>").unwrap(), "<p>.</p>");
    // A `>` inside a quoted value does not end the tag.
    assert_eq!(
        render(r#"<p><esi:include src="/a>b"/></p>"#).unwrap(),
        "<p>[/a>b]</p>"
    );
}

#[test]
fn remove_comment_and_esi_comments() {
    assert_eq!(
        render("<p>a<esi:remove><a href=\"/l\">l</a></esi:remove>b</p>").unwrap(),
        "<p>ab</p>"
    );
    assert_eq!(
        render("<p>a<!--esi <b>x</b><esi:include src=\"/f\"/> -->b<!-- plain --></p>").unwrap(),
        "<p>a <b>x</b>[/f] b<!-- plain --></p>"
    );
    assert_eq!(
        render("<p>a<esi:comment text=\"note\"/>b</p>").unwrap(),
        "<p>ab</p>"
    );
    // An unterminated remove takes the rest of the page.
    assert_eq!(render("<p>a<esi:remove>b").unwrap(), "<p>a");
}

#[test]
fn what_is_not_processed() {
    assert_eq!(parse(b"{\"json\": \"<esi:include src=/x/>\"}"), None);
    assert_eq!(parse(b"   "), None);
    // Other ESI elements and HTML stay as they are.
    assert_eq!(
        render("<p><esi:vars>$(HTTP_HOST)</esi:vars><esi:included/></p>").unwrap(),
        "<p><esi:vars>$(HTTP_HOST)</esi:vars><esi:included/></p>"
    );
    // An unterminated tag is text.
    assert_eq!(
        render("<p><esi:include src=\"/x\"").unwrap(),
        "<p><esi:include src=\"/x\""
    );
    // Text segments are merged: a page without ESI is one segment.
    assert_eq!(
        parse(b"<p>a<b>c</b></p>").unwrap(),
        vec![Segment::Text(0, 16)]
    );
}
