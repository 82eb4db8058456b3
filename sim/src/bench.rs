//! `fencesim bench`: simulation speed, measured in one process (issue 10).

use crate::cli::{BenchArgs, InputError};
use crate::hunt::sweep;
use crate::model::Model;
use std::process::ExitCode;
use std::time::Instant;

pub fn bench(args: &BenchArgs) -> Result<ExitCode, InputError> {
    if args.seeds == 0 {
        return Err(InputError("--seeds must be at least 1".into()));
    }
    let model = Model::default();
    let started = Instant::now();
    let results = sweep(0..args.seeds, &model, 1, false, None);
    let wall_s = started.elapsed().as_secs_f64().max(1e-9);
    let sim_s: f64 = results.iter().map(|r| r.sim_ms as f64 / 1_000.0).sum();
    let messages: u64 = results.iter().map(|r| r.messages).sum();
    let stack_msgs_per_s = messages as f64 / wall_s;
    let seeds_per_s = args.seeds as f64 / wall_s;
    let sim_speedup = sim_s / wall_s;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "stack_msgs_per_s": stack_msgs_per_s,
                "sim_speedup": sim_speedup,
                "seeds_per_s": seeds_per_s,
                "seeds": args.seeds,
            })
        );
    } else {
        println!("full stack, standard model, 1 thread: {seeds_per_s:.2} seeds/s, {stack_msgs_per_s:.0} messages/s, {sim_speedup:.0}x real time");
    }
    Ok(ExitCode::SUCCESS)
}
