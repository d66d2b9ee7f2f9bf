"""One line per env-step record of this folder: manager phases (ms per env step, profiled pass),
streamed medians (env steps/s) and their ratios, the paired single-step ratio (drift control)."""
import json
import sys

for path in sys.argv[1:]:
    u = json.load(open(path))
    p, e, r = u["phases_ms_per_step"], u["env_steps_per_s"], u["ratio_to_raw_median"]
    print(path.split("/")[-1],
          "managers %.2f update_state %.2f final_obs %.2f reset_done %.2f observation %.2f step %.1f ms |" % (
              p["manager_overhead_ms"], p["update_state_ms"], p["final_obs_ms"], p["reset_done_ms"],
              p["observation_ms"], p["step_total_ms"]),
          "env %.0f raw %.0f replay %.0f | env/raw %.3f env/replay %.3f paired single-step %.3f |" % (
              e["env_zero"]["median"], e["raw"]["median"], e["raw_replaying_env_writes"]["median"], r["env_zero"],
              r["env_vs_raw_replaying_env_writes"], u["paired_ratio_to_raw"]["env_zero"]["median"]),
          "kernel ops %d python calls %.0f" % (u["dispatch_per_env_step"]["kernel_ops_per_step"],
                                               u["python_calls_per_env_step"]))
