use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::bans::kept::DiskBans;

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kura-http-journal-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("bans")
}

fn ban(seq: u32, text: &str, soft: bool) -> Arc<Ban> {
    Arc::new(Ban {
        seq,
        expr: Expr::parse(text).unwrap(),
        soft,
        added: UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
    })
}

#[test]
fn bans_come_back_in_order_superseded_ones_gone() {
    let path = temp("order");
    let disk = DiskBans::open(&path, Loaded::default()).unwrap();
    disk.added(&ban(1, "obj.url ~ ^/a", false));
    disk.added(&ban(2, "obj.url ~ ^/b", true));
    disk.added(&ban(3, "obj.url ~ ^/a", false));
    disk.added(&ban(4, r#"obj.http.xkey == "x \"y\"""#, false));
    assert_eq!(disk.len(), 3);
    let loaded = load(&path).unwrap().unwrap();
    let seqs: Vec<u32> = loaded.bans.iter().map(|b| b.seq).collect();
    assert_eq!(seqs, [2, 3, 4]);
    assert!(loaded.bans[0].soft);
    assert_eq!(loaded.bans[2].expr.text(), r#"obj.http.xkey == "x \"y\"""#);
    assert_eq!(loaded.bans[1].added, ban(3, "obj.url ~ x", false).added);
    assert_eq!(loaded.head(), 4);
    // Not closed: trusted only in this boot.
    assert!(!loaded.clean);
    assert_eq!(loaded.boot, boot_id());
    assert_eq!(loaded.trusted(), boot_id().is_some());
    disk.close();
    let closed = load(&path).unwrap().unwrap();
    assert!(closed.clean && closed.trusted());
    // Written again at the next start: the bans, no clean mark until the next stop.
    let again = DiskBans::open(&path, closed).unwrap();
    assert_eq!(again.len(), 3);
    let reread = load(&path).unwrap().unwrap();
    assert_eq!(reread.bans.len(), 3);
    assert!(!reread.clean);
}

#[test]
fn another_boot_after_an_unclean_stop_is_not_trusted() {
    let loaded = Loaded {
        boot: Some("another-boot".into()),
        ..Loaded::default()
    };
    assert!(!loaded.trusted());
    let unknown = Loaded::default();
    assert!(!unknown.trusted());
}

#[test]
fn the_floor_drops_older_bans_and_bad_lines_are_refused() {
    let path = temp("floor");
    let b = |seq| ban_line(&ban(seq, "obj.status == 404", seq % 2 == 0));
    let text = format!("{FIRST_LINE}\nF 0\n{}{}F 6\n{}", b(5), b(7), b(9));
    std::fs::write(&path, &text).unwrap();
    let loaded = load(&path).unwrap().unwrap();
    // 7 superseded by 9 (the same expression, both hard), 5 under the floor.
    assert_eq!(loaded.bans.iter().map(|b| b.seq).collect::<Vec<_>>(), [9]);
    assert_eq!((loaded.floor, loaded.head()), (6, 9));
    for bad in [
        "B 1 2 3 x\n",
        "F x\n",
        "what\n",
        "B 1 0 0 [\"t\",[[\"nope\",\"\",\"==\",\"1\"]]]\n",
    ] {
        std::fs::write(&path, format!("{FIRST_LINE}\n{bad}")).unwrap();
        assert!(load(&path).is_err(), "{bad}");
    }
    std::fs::write(&path, "something else\n").unwrap();
    assert!(load(&path).is_err());
    std::fs::remove_file(&path).unwrap();
    assert!(load(&path).unwrap().is_none());
}
