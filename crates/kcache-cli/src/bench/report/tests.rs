//! The report's tables and its JSON twin, from hand-made runs.

use super::*;
use crate::bench::PeerKind;

fn row(peer: &str, storage: Option<&str>, protobuf: bool, sync_ms: f64) -> Row {
    let mut label = format!("{peer} list-watch");
    if let Some(s) = storage {
        label = format!("{label} {s}");
    }
    if protobuf {
        label.push_str(" protobuf");
    }
    let stat = |v: f64| Stat {
        median: v,
        min: v,
        max: v,
    };
    Row {
        n: 10,
        label,
        peer: peer.to_owned(),
        mode: "list-watch".to_owned(),
        storage: storage.map(str::to_owned),
        protobuf,
        runs_ok: 1,
        runs_failed: 0,
        figures: BTreeMap::from([("sync_ms", stat(sync_ms)), ("sync_cpu_s", stat(1.0))]),
    }
}

/// The ratio cells of the table row starting with `| {label} |` after `heading`.
fn ratio_cells(md: &str, heading: &str, label: &str) -> Vec<String> {
    let table = &md[md.find(heading).expect(heading)..];
    let line = table
        .lines()
        .find(|l| l.starts_with(&format!("| {label} |")))
        .expect(label);
    line.split('|')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .skip(1)
        .map(str::to_owned)
        .collect()
}

#[test]
fn kcache_is_compared_with_the_peer_line_of_the_same_wire_format() {
    let rows = [
        row("client-go", None, false, 2000.0),
        row("client-go", None, true, 1000.0),
        row("kcache", Some("typed"), false, 3000.0),
        row("kcache", Some("typed"), true, 500.0),
    ];
    let md = markdown("test", &[], &rows, 1);
    let vs = "Ratios kcache / client-go";
    // sync wall: protobuf 500 / client-go protobuf 1000; best of client-go is 1000.
    assert_eq!(
        ratio_cells(&md, vs, "kcache list-watch typed protobuf")[0],
        "0.50× [0.50×]"
    );
    // JSON 3000 / client-go JSON 2000; against client-go's best (1000): 3×.
    assert_eq!(
        ratio_cells(&md, vs, "kcache list-watch typed")[0],
        "1.50× [3.00×]"
    );
}

#[test]
fn protobuf_rows_get_a_ratio_to_their_json_twin() {
    let rows = [
        row("client-go", None, false, 2000.0),
        row("client-go", None, true, 1000.0),
        row("kcache", Some("typed"), false, 3000.0),
        row("kcache", Some("typed"), true, 500.0),
        row("kcache", Some("stripped"), true, 400.0),
    ];
    let md = markdown("test", &[], &rows, 1);
    let heading = "Ratios protobuf / JSON";
    let typed = ratio_cells(&md, heading, "kcache list-watch typed protobuf");
    assert_eq!(typed[0], format!("{:.2}×", 500.0 / 3000.0));
    assert_eq!(typed[1], "1.00×");
    assert_eq!(
        ratio_cells(&md, heading, "client-go list-watch protobuf")[0],
        "0.50×"
    );
    let after = &md[md.find(heading).unwrap()..];
    assert!(
        !after.contains("stripped"),
        "a protobuf row without a JSON twin has no ratio"
    );
}

#[test]
fn lines_get_their_ratio_to_the_limit_line_of_the_same_format() {
    let rows = [
        row("client-go", None, false, 2000.0),
        row("client-go", None, true, 1000.0),
        row("kcache", Some("limit"), false, 400.0),
        row("kcache", Some("limit"), true, 250.0),
        row("kcache", Some("typed"), true, 500.0),
    ];
    let md = markdown("test", &[], &rows, 1);
    let heading = "Sync wall × limit";
    assert_eq!(
        ratio_cells(&md, heading, "client-go list-watch"),
        ["2000", "400", "5.00×"]
    );
    assert_eq!(
        ratio_cells(&md, heading, "kcache list-watch typed protobuf"),
        ["500", "250", "2.00×"]
    );
    let vs = &md[md.find("Ratios kcache / client-go").unwrap()..];
    let table: Vec<&str> = vs
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert!(table.len() == 3, "{table:?}");
    assert!(
        table.iter().all(|l| !l.contains("limit")),
        "the limit line is no kcache line: {table:?}"
    );
}

#[test]
fn no_limit_line_no_limit_table() {
    let rows = [row("client-go", None, false, 2000.0)];
    assert!(!markdown("test", &[], &rows, 1).contains("× limit"));
}

#[test]
fn page_faults_are_shown_per_object_and_per_update_event() {
    let line: kcache_bench::PeerLine = serde_json::from_str(
        r#"{"peer":"kcache","mode":"list-watch","n":10,"sync_ms":5.0,"sync_cpu_s":0.1,
           "vmhwm_bytes":1,"rss_after_sync_bytes":1,"update_events":4,
           "update_events_per_s":2.0,"update_cpu_s":0.01,
           "sync_page_faults":25,"update_page_faults":6}"#,
    )
    .unwrap();
    let record = Record {
        n: 10,
        run: 0,
        label: "kcache list-watch default".into(),
        peer: PeerKind::Kcache,
        mode: "list-watch",
        storage: Some("default".into()),
        protobuf: false,
        line: Ok(line),
        server: None,
    };
    let rows = rows(&[record]);
    assert_eq!(rows[0].figures["sync_faults_per_obj"].median, 2.5);
    assert_eq!(rows[0].figures["update_faults_per_event"].median, 1.5);
    let md = markdown("s", &[], &rows, 1);
    assert!(md.contains("| 2.5 | 1.5 |"), "{md}");
    assert!(
        !md.contains("cost the API server"),
        "nothing measured: {md}"
    );
}

#[test]
fn the_server_cost_gets_its_table_per_update_event() {
    let line: kcache_bench::PeerLine = serde_json::from_str(
        r#"{"peer":"client-go","mode":"streaming","n":10,"sync_ms":5.0,"sync_cpu_s":0.1,
           "vmhwm_bytes":1,"rss_after_sync_bytes":1,"update_events":4,
           "update_events_per_s":2.0,"update_cpu_s":0.01}"#,
    )
    .unwrap();
    let phase = |cpu_s, growth, written| kcache_bench::server_cost::PhaseCost {
        cpu_s,
        rss_growth_bytes: growth,
        rss_start_bytes: 1,
        written_bytes: written,
    };
    let record = Record {
        n: 10,
        run: 0,
        label: "client-go streaming".into(),
        peer: PeerKind::ClientGo,
        mode: "streaming",
        storage: None,
        protobuf: false,
        line: Ok(line),
        server: Some(ServerCost {
            sync: phase(1.5, 30_000_000, 2_500_000),
            update: Some(phase(0.002, 0, 9)),
        }),
    };
    let rows = rows(&[record]);
    assert_eq!(
        rows[0].figures["server_update_cpu_us_per_event"].median,
        500.0
    );
    let md = markdown("s", &[], &rows, 1);
    assert!(
        md.contains("| client-go streaming | 1.50 | 30 | 2.5 | 500 | 0 |"),
        "{md}"
    );
}

#[test]
fn stat_takes_median_min_max() {
    let s = Stat::of(vec![3.0, 1.0, 2.0]).unwrap();
    assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
    let s = Stat::of(vec![4.0, 1.0, 2.0, 3.0]).unwrap();
    assert_eq!(s.median, 2.5);
    assert!(Stat::of(vec![]).is_none());
    assert!(Stat::of(vec![f64::NAN]).is_none());
}
