//! Delta debugging (Zeller and Hildebrandt's ddmin): the smallest subset of a
//! list that still fails, generic over the predicate so it is tested on
//! synthetic lists alone.
//!
//! The result is 1-minimal: removing any one remaining item makes the
//! predicate pass (as far as the predicate answered; a predicate that gives
//! up, e.g. when the time budget is spent, answers "passes" and the items
//! stay).
//!
//! Two changes from the textbook, both for runs where removing an event
//! reshuffles everything after it (one network stream draws every packet's
//! fate, so a run without an early pause differs from then on): chunks
//! are dropped from the end first (a late event's removal disturbs the
//! least of the run), and at single-item granularity a sweep tries each
//! item once, from the end, keeping every removal, instead of starting
//! over after each one (`n` tests a pass instead of `n` per removal).

/// Most predicate calls of one ddmin: a 1,000-event plan needs far fewer.
pub const TESTS_MAX: usize = 100_000;

/// Granularity up to which a chunk is also tried alone (keeping only it):
/// finer, a single chunk is rarely the whole story, and each try is a run.
const ALONE_CHUNKS_MAX: usize = 4;

/// The 1-minimal failing subset of `items`, in their order. `fails` must
/// hold for `items` itself (asserted by the caller's run, not re-tested here).
pub fn ddmin<T: Clone>(items: &[T], mut fails: impl FnMut(&[T]) -> bool) -> Vec<T> {
    if items.is_empty() || fails(&[]) {
        return Vec::new();
    }
    let mut current: Vec<T> = items.to_vec();
    let mut chunks = 2usize;
    let mut tests = 1usize;
    while current.len() >= 2 && chunks < current.len() && tests < TESTS_MAX {
        let parts = split(&current, chunks);
        let mut reduced = false;
        // A single chunk that fails on its own: keep only it.
        if chunks <= ALONE_CHUNKS_MAX {
            for part in &parts {
                tests += 1;
                if fails(part) {
                    current = part.clone();
                    chunks = 2;
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced && chunks > 2 {
            // The complement of a chunk that still fails: drop the chunk, the last first.
            for i in (0..parts.len()).rev() {
                let complement: Vec<T> =
                    parts.iter().enumerate().filter(|(j, _)| *j != i).flat_map(|(_, p)| p.iter().cloned()).collect();
                tests += 1;
                if fails(&complement) {
                    current = complement;
                    chunks = (chunks - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            chunks = (chunks * 2).min(current.len());
        }
    }
    sweep(current, fails, TESTS_MAX.saturating_sub(tests))
}

/// Each item tried away once, from the last to the first, every removal
/// that still fails kept; passes repeat until one removes nothing, so the
/// result is 1-minimal. At most `tests` predicate calls.
pub fn sweep<T: Clone>(mut current: Vec<T>, mut fails: impl FnMut(&[T]) -> bool, mut tests: usize) -> Vec<T> {
    loop {
        let mut removed = false;
        let mut i = current.len();
        while i > 0 && tests > 0 {
            i -= 1;
            let mut without = current.clone();
            without.remove(i);
            tests -= 1;
            if fails(&without) {
                current = without;
                removed = true;
            }
        }
        if !removed || tests == 0 {
            return current;
        }
    }
}

/// `items` cut into `n` contiguous parts of nearly equal length (none empty).
fn split<T: Clone>(items: &[T], n: usize) -> Vec<Vec<T>> {
    assert!(n >= 1 && n <= items.len().max(1));
    let (base, extra) = (items.len() / n, items.len() % n);
    let mut parts = Vec::with_capacity(n);
    let mut start = 0;
    for i in 0..n {
        let len = base + usize::from(i < extra);
        parts.push(items[start..start + len].to_vec());
        start += len;
    }
    assert_eq!(start, items.len());
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs(required: &[u32]) -> impl Fn(&[u32]) -> bool + '_ {
        move |subset: &[u32]| required.iter().all(|r| subset.contains(r))
    }

    #[test]
    fn a_property_that_needs_exactly_events_3_and_17_comes_back_as_exactly_those() {
        let plan: Vec<u32> = (0..64).collect();
        let mut calls = 0;
        let shrunk = ddmin(&plan, |s| {
            calls += 1;
            needs(&[3, 17])(s)
        });
        assert_eq!(shrunk, vec![3, 17]);
        assert!(calls < 64, "ddmin took {calls} tests for two events of 64");
    }

    #[test]
    fn one_needed_event_and_none_needed() {
        let plan: Vec<u32> = (0..50).collect();
        assert_eq!(ddmin(&plan, needs(&[49])), vec![49]);
        assert_eq!(ddmin(&plan, needs(&[])), Vec::<u32>::new());
    }

    #[test]
    fn the_result_is_one_minimal_for_scattered_needs() {
        let plan: Vec<u32> = (0..70).collect();
        let required = [0, 9, 33, 34, 69];
        let shrunk = ddmin(&plan, needs(&required));
        assert_eq!(shrunk, required);
        for i in 0..shrunk.len() {
            let mut without = shrunk.clone();
            without.remove(i);
            assert!(!needs(&required)(&without));
        }
    }

    #[test]
    fn either_of_two_alternatives_is_enough() {
        // Fails with 5 or with 40: one of them is kept, alone.
        let plan: Vec<u32> = (0..60).collect();
        let shrunk = ddmin(&plan, |s| s.contains(&5) || s.contains(&40));
        assert_eq!(shrunk.len(), 1);
        assert!(shrunk == [5] || shrunk == [40]);
    }

    #[test]
    fn many_needed_items_cost_tests_in_proportion_to_the_list_not_its_square() {
        // A plan where half the events matter: textbook ddmin starts over
        // after each single removal; the sweep tries each once a pass.
        let plan: Vec<u32> = (0..60).collect();
        let required: Vec<u32> = (0..60).filter(|i| i % 2 == 0).collect();
        let mut calls = 0;
        let shrunk = ddmin(&plan, |s| {
            calls += 1;
            needs(&required)(s)
        });
        assert_eq!(shrunk, required);
        assert!(calls <= 4 * plan.len(), "{calls} tests for 60 events");
    }

    #[test]
    fn the_sweep_drops_from_the_end_first_and_keeps_going() {
        // Either the last item or the first may go, not both: the last goes.
        let fails = |s: &[u32]| s.contains(&1) && (s.contains(&0) || s.contains(&2));
        assert_eq!(sweep(vec![0, 1, 2], fails, 10), vec![0, 1]);
        assert_eq!(sweep(vec![0, 1, 2], fails, 0), vec![0, 1, 2], "no tests left: nothing removed");
    }

    #[test]
    fn a_predicate_that_gives_up_keeps_what_it_has() {
        let plan: Vec<u32> = (0..16).collect();
        assert_eq!(ddmin(&plan, |_| false), plan);
    }
}
