//! CI's short version of the scale benchmark: TPC-H at scale factor 0.01
//! on a one-node Garage, DataFusion 55 over the plain store and through
//! `CachedStore` (memory only and with an L2), every pass (the warm one in
//! two rounds); every answer
//! must equal the plain store's, a warm pass through the cache must
//! fetch no data, and the multiarc rows report their ARC split. Skips
//! (with the install command) where Garage is absent, unless CI is set.

mod common;

use multiarc_scale::engine::{self, Row};

#[test]
fn datafusion_through_cached_store_answers_as_the_plain_store() {
    let Some(tpch) = common::tpch_on_garage(256 << 10) else {
        return;
    };
    let lineitem = tpch.written.iter().find(|w| w.table == "lineitem").unwrap();
    assert_eq!(
        lineitem.rows, 60_175,
        "the specification's lineitem rows at SF 0.01"
    );
    let setup = &tpch.setup;
    let rows = [Row::Datafusion, Row::Multiarc, Row::MultiarcL2];
    let queries = [1, 3, 5, 6, 14, 18];
    let results = engine::run(
        &rows,
        setup,
        &queries,
        2,
        std::path::Path::new(env!("CARGO_BIN_EXE_multiarc-scale")),
        |p| eprintln!("{p}"),
    )
    .unwrap();
    // 3 rows x (6 cold + 2 x 6 warm + 5 hot before the scan + 1 scan + 5
    // hot after it + 6 remount), in that order of passes for each row.
    assert_eq!(
        results.len(),
        3 * (6 + 2 * 6 + 5 + 1 + 5 + 6),
        "{results:#?}"
    );
    for row in ["datafusion", "multiarc", "multiarc-l2"] {
        let passes: Vec<(&str, usize)> = results
            .iter()
            .filter(|r| r.row == row)
            .map(|r| (r.pass.as_str(), r.round))
            .collect();
        let mut order = passes.clone();
        order.dedup();
        let expected: Vec<(&str, usize)> = engine::PASSES
            .iter()
            .flat_map(|&p| {
                let rounds = if p == "warm" { 2 } else { 1 };
                (0..rounds).map(move |round| (p, round))
            })
            .collect();
        assert_eq!(order, expected, "{row}: {passes:?}");
    }
    // The rows' order turns at each pass and round: the first row of the
    // cold pass is not the first of the warm pass's rounds.
    let firsts: Vec<&str> = ["cold", "warm"]
        .iter()
        .flat_map(|&p| (0..2).map(move |round| (p, round)))
        .filter_map(|(p, round)| {
            results
                .iter()
                .find(|r| r.pass == p && r.round == round)
                .map(|r| r.row.as_str())
        })
        .collect();
    assert_eq!(
        firsts,
        ["datafusion", "multiarc", "multiarc-l2"],
        "{firsts:?}"
    );
    for r in &results {
        assert!(r.error.is_none(), "{r:?}");
        assert_eq!(r.answer_ok, Some(true), "{r:?}");
    }
    // The cache's ARC split after each query: multiarc rows only, p
    // within c, and the cached bytes never far past c. (Not MFU after the
    // warm pass: the lazy mode promotes a buffer hit again when its clock
    // hand comes round, and this cache never fills.)
    for r in &results {
        match (&r.arc_after, r.row.as_str()) {
            (None, "datafusion") => {}
            (Some(a), "multiarc" | "multiarc-l2") => {
                assert!(a.p <= a.c, "{r:?}");
                assert!(a.mru_bytes + a.mfu_bytes <= a.c + a.c / 2, "{r:?}");
            }
            _ => panic!("an ARC split on the wrong row, or none on a multiarc row: {r:?}"),
        }
    }
    for r in results
        .iter()
        .filter(|r| r.row != "datafusion" && r.pass == "warm")
    {
        assert_eq!(r.store_bytes, 0, "a warm query fetched data: {r:?}");
    }
    // The L2 survives the restart: the remount pass fetches no data.
    for r in results
        .iter()
        .filter(|r| r.row == "multiarc-l2" && r.pass == "remount")
    {
        assert_eq!(r.store_bytes, 0, "after the restart: {r:?}");
    }
}
