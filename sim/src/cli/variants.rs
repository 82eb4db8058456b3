//! `variants`: the protocol variants, and with `--score` the checker's
//! mutation score: seeds of each unsafe variant until its first detection.

use crate::cli::args::{check_steer, exit_for, parse_seeds, InputError, VariantsArgs};
use crate::faults::steer::Steer;
use crate::model::Model;
use crate::plural;
use crate::run::sweep::{default_jobs, quiet_panics, sweep_each, sweep_steered, Flow, SeedResult, Sweep};
use fencelock::{Property, Variant, VARIANTS};
use serde::Serialize;
use std::ops::Range;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;

#[derive(Serialize)]
struct VariantJson {
    name: &'static str,
    safe: bool,
    breaks: Option<Property>,
    about: &'static str,
}

#[derive(Serialize)]
struct ScoreJson {
    name: &'static str,
    breaks: Option<Property>,
    detected: bool,
    seeds_to_detection: Option<u64>,
    seed: Option<u64>,
    property: Option<Property>,
}

pub fn variants(args: &VariantsArgs) -> Result<ExitCode, InputError> {
    if !args.score {
        if args.json {
            let list: Vec<VariantJson> = VARIANTS
                .iter()
                .map(|v| VariantJson { name: v.name, safe: v.variant.is_safe(), breaks: v.breaks, about: v.about })
                .collect();
            crate::outln!("{}", serde_json::to_string(&list).expect("variants serialize"));
        } else {
            for v in VARIANTS {
                crate::outln!("{:<32} {:<18} {}", v.name, v.breaks.map_or("(safe)", Property::id), v.about);
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let seeds = parse_seeds(&args.seeds)?;
    check_steer(args.steer, args.swarm)?;
    let seeds_max = seeds.end - seeds.start;
    quiet_panics();
    let jobs = default_jobs();
    let mut rows = Vec::new();
    for info in VARIANTS.iter().filter(|v| !v.variant.is_safe()) {
        let row = score_one(score_model(info.variant, args.swarm), seeds.clone(), jobs, args.steer);
        if !args.json {
            match (row.seed, row.property) {
                (Some(seed), Some(property)) => crate::outln!(
                    "{:<32} breaks {:<18} found {:<18} after {:>4} {} (seed {seed})",
                    info.name,
                    info.breaks.map_or("-", Property::id),
                    property,
                    row.seeds_to_detection.unwrap_or(0),
                    if row.seeds_to_detection == Some(1) { "seed " } else { "seeds" }
                ),
                _ => crate::outln!(
                    "{:<32} breaks {:<18} NOT DETECTED in {}",
                    info.name,
                    info.breaks.map_or("-", Property::id),
                    plural(seeds_max, "seed")
                ),
            }
        }
        rows.push(row);
    }
    if args.json {
        crate::outln!("{}", serde_json::to_string(&rows).expect("scores serialize"));
    } else {
        crate::outln!("{}", score_summary(&rows, seeds_max));
    }
    Ok(exit_for(rows.iter().all(|r| r.detected)))
}

/// One line over a score table: how many variants were caught, and the
/// median and worst seeds to detection (an undetected variant counts as
/// beyond every seed tried).
fn score_summary(rows: &[ScoreJson], seeds_max: u64) -> String {
    let detected = rows.iter().filter(|r| r.detected).count();
    let mut seeds: Vec<u64> = rows.iter().map(|r| r.seeds_to_detection.unwrap_or(u64::MAX)).collect();
    seeds.sort_unstable();
    let show = |n: u64| if n == u64::MAX { format!(">{seeds_max}") } else { n.to_string() };
    let median = match seeds.len() {
        0 => "-".to_string(),
        len if !len.is_multiple_of(2) => show(seeds[len / 2]),
        len if seeds[len / 2] == u64::MAX => show(u64::MAX),
        len => {
            let twice = seeds[len / 2 - 1] + seeds[len / 2];
            if twice.is_multiple_of(2) {
                (twice / 2).to_string()
            } else {
                format!("{}.5", twice / 2)
            }
        }
    };
    let max = seeds.last().map_or("-".to_string(), |n| show(*n));
    format!(
        "score: {detected} of {} unsafe variants detected within {}; seeds to detection: median {median}, max {max}",
        rows.len(),
        plural(seeds_max, "seed")
    )
}

/// The model a variant is scored on: its declared model, or with swarm the
/// standard model as the limits of every seed's draw (swarm draws the
/// cluster size and batching a variant would declare).
fn score_model(variant: Variant, swarm: bool) -> Model {
    if swarm {
        Model { swarm: true, variant, ..Model::default() }
    } else {
        Model::declared(variant)
    }
}

/// Seeds of a variant on its model, in order, until one violates the
/// property the variant is expected to break (`breaks`); other violations on
/// the way (symptoms of the same flaw) do not count as detection. With
/// `steer`, the seeds run as `hunt --steer` runs them.
fn score_one(model: Model, seeds: Range<u64>, jobs: usize, steer: bool) -> ScoreJson {
    let info = model.variant.info();
    let never = AtomicBool::new(false);
    let how = Sweep { jobs, twice: false, stop: &never };
    let mut first = None;
    let on_result = |result: SeedResult| {
        if first.is_none() && result.violations.iter().any(|v| Some(v.property) == info.breaks) {
            first = Some(result.seed);
        }
        if first.is_some() {
            Flow::Stop
        } else {
            Flow::Continue
        }
    };
    if steer {
        sweep_steered(seeds.clone(), &model, how, &mut Steer::default(), |_| None, on_result);
    } else {
        sweep_each(seeds.clone(), &model, how, on_result);
    }
    ScoreJson {
        name: info.name,
        breaks: info.breaks,
        detected: first.is_some(),
        seeds_to_detection: first.map(|seed| seed - seeds.start + 1),
        seed: first,
        property: first.and(info.breaks),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seeds_to_detection: Option<u64>) -> ScoreJson {
        let detected = seeds_to_detection.is_some();
        let property = detected.then_some(Property::FencedWrite);
        let seed = seeds_to_detection.map(|n| n - 1);
        ScoreJson { name: "x", breaks: Some(Property::FencedWrite), detected, seeds_to_detection, seed, property }
    }

    #[test]
    fn the_score_summary_counts_undetected_variants_as_beyond_every_seed() {
        let odd = [row(Some(9)), row(Some(1)), row(Some(4))];
        assert!(score_summary(&odd, 100)
            .ends_with("3 of 3 unsafe variants detected within 100 seeds; seeds to detection: median 4, max 9"));
        let even = [row(Some(10)), row(Some(17)), row(Some(1)), row(Some(2))];
        assert!(score_summary(&even, 100).ends_with("median 6, max 17"), "{}", score_summary(&even, 100));
        let half = [row(Some(10)), row(Some(3))];
        assert!(score_summary(&half, 100).ends_with("median 6.5, max 10"));
        let missed = [row(Some(10)), row(None), row(None)];
        assert!(score_summary(&missed, 100).contains("1 of 3"));
        assert!(score_summary(&missed, 100).ends_with("median >100, max >100"));
    }
}
