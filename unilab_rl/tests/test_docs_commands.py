"""Every command and override the docs show works as shown.

The command lines (``unilab-train``, ``unilab-play``, ``unilab-eval``, ``unilab-export``) in
README.md, docs/training.md, docs/tasks.md and docs/results.md are extracted from their code
blocks and inline code, and each must parse with its tool's argument parser; a training
command's overrides must also pass the same checks unilab-train makes before building anything
(algorithm and runner configs validated, env overrides resolved against the real task config,
``--eval``'s ``eval.KEY=VALUE`` options against the task's evaluation; with ``--seeds``, the
command its first seed's process runs). Every inline ``key=value`` override shown in
prose is checked the same way, on the task the sentence names (``... on g1_walk_flat_unfused``),
else g1_walk_flat. These checks build no env; one test also runs README's CPU quick-start chain
for real (train, play with video, export, eval of the checkpoint and of the exported file,
--config) with tiny budgets on mujoco (about 15 s), and the report reader the README's sequence
ends on, which must exit 0 where the sweep failed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from unilab.evaluation import task_evaluation
from unilab.fingerprint import task_fingerprint
from unilab_rl.algorithms import ALGORITHMS
from unilab_rl.cli import evaluate as eval_cli
from unilab_rl.cli import export as export_cli
from unilab_rl.cli import play as play_cli
from unilab_rl.cli import seeds, train_args, train_plan
from unilab_rl.cli import train as train_cli
from unilab_rl.cli.overrides import Namespace, OverrideError, env_namespace, fields_namespace, route
from unilab_rl.cli.train_command import parse_command
from unilab_rl.runner_config import RunnerConfig

from unilab import list_tasks

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "docs" / "training.md", ROOT / "docs" / "tasks.md", ROOT / "docs" / "results.md"]
TOOLS = ("unilab-train", "unilab-play", "unilab-eval", "unilab-export")
# Inline spans that look like key=value but are Python keyword arguments named in prose.
PYTHON_KWARGS = {"capturable", "weights_only", "init_at_random_ep_len", "deterministic", "allow_pickle"}
OVERRIDE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*=[^\s=]+$")
DEFAULT_TASK = "g1_walk_flat"


def _strip_prefix(line: str) -> str | None:
    """The command without its ``.venv/bin/`` prefix, if it runs one of TOOLS."""
    line = line.strip().replace(".venv/bin/python ", "python ").replace(".venv/bin/", "")
    return line if line.startswith(TOOLS) else None


def doc_commands() -> list[tuple[str, str]]:
    """(where, command) of every tool command in the docs' code blocks and inline code;
    synopsis lines with placeholders (``[--flag X]``, ``A | B``) are left out."""
    found = []
    for path in DOCS:
        text = path.read_text()
        for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", text, flags=re.S):
            joined = re.sub(r"\\\n\s*", " ", block)
            for line in joined.splitlines():
                command = _strip_prefix(line.split(" # ")[0].split("   #")[0])
                if command:
                    found.append((path.name, command))
        for span in re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S)):
            command = _strip_prefix(span)
            if command and " " in command.strip() and not re.search(r"\[|\||\bFILE\b|\bPATH\b|\bNAME\b", command):
                found.append((path.name, command))
    return found


def doc_overrides() -> list[tuple[str, str, str]]:
    """(where, key=value, task) of every inline override shown in prose."""
    found = []
    for path in DOCS:
        prose = re.sub(r"```.*?```", lambda block: "\n" * block[0].count("\n"), path.read_text(), flags=re.S)
        for number, line in enumerate(prose.splitlines(), 1):
            for match in re.finditer(r"`([^`]+)`", line):
                tokens = match[1].split()
                if not tokens or not all(OVERRIDE.match(t) for t in tokens):
                    continue
                named = re.search(r"\bon (g1_\w+)", line[match.end():])
                task = named[1] if named else DEFAULT_TASK
                for token in tokens:
                    key, _, value = token.partition("=")
                    if key not in PYTHON_KWARGS and key != "key" and value.lower() != "value":
                        found.append((f"{path.name}:{number}", token, task))
    return found


def check_override(token: str, task: str, algo: str | None = None) -> None:
    """The checks an override meets before anything is built: routed as unilab-train routes it
    (for some algorithm, or ``algo``'s), ``eval.*`` as unilab-eval's protocol options, then
    validated where it went; a bare key two namespaces name is refused as ambiguous."""
    refused = None
    for name, algorithm in ALGORITHMS.items():
        if algo not in (None, name):
            continue
        namespaces = [fields_namespace("algo", "algorithm", algorithm.config_class),
                      fields_namespace("runner", "runner", RunnerConfig), env_namespace(task),
                      Namespace("eval", "evaluation", None, bare=False)]
        try:
            routed = route([token], namespaces)
        except OverrideError as error:
            refused = refused or error
            continue
        algorithm.config_class.model_validate(routed["algo"])
        RunnerConfig.model_validate(routed["runner"])
        if routed["eval"]:
            task_evaluation(task, routed["eval"])
        if routed["env"]:
            task_fingerprint(task, routed["env"])  # raises naming the key on a bad value
        return
    raise refused


def check_train_command(argv: list[str]) -> None:
    """What unilab-train checks before building the env, without a checkpoint, record or --out."""
    parser = train_cli.build_parser(list_tasks())
    args, eval_options = parse_command(parser, argv)
    if args.list_tasks:
        return
    if args.seeds is not None:  # what its first seed's process runs
        args, eval_options = parse_command(parser, seeds.seed_argv(args.seeds[0], args.out, argv))
    args.resume = None  # the checkpoint a docs example resumes exists only after its run
    args.config = None  # likewise the run record
    plan = train_plan.prepare(args, list_tasks(), check_out=False)
    task_fingerprint(args.task, plan["env_overrides"])
    for token in eval_options:  # --eval: what it hands unilab-eval is a protocol option of the run's task
        check_override(token, args.task)


def check_command(command: str) -> None:
    argv = shlex.split(command.replace('"$OUT"', "runs/out"))
    if argv == ["unilab-train", "--help"]:
        with pytest.raises(SystemExit) as shown:
            train_cli.build_parser(list_tasks()).parse_intermixed_args(argv[1:])
        assert shown.value.code == 0
        return
    if argv[0] == "unilab-train":
        check_train_command(argv[1:])
    elif argv[0] == "unilab-eval":
        args = eval_cli.build_parser().parse_args(argv[1:])
        for token in args.overrides:
            check_override(token, "g1_walk_flat")
    else:
        parser = {"unilab-play": play_cli, "unilab-export": export_cli}[argv[0]].build_parser()
        parser.parse_args(argv[1:])


COMMANDS = doc_commands()
OVERRIDES = doc_overrides()


def test_the_docs_show_commands_of_every_tool_and_overrides():
    tools = {shlex.split(c)[0] for _, c in COMMANDS}
    assert tools >= {"unilab-train", "unilab-play", "unilab-eval", "unilab-export"}, tools
    assert len(OVERRIDES) >= 8 and any(t == "rewards.velocity.weights.alive=2" for _, t, _ in OVERRIDES)


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[f"{w}:{c[:60]}" for w, c in COMMANDS])
def test_every_command_in_the_docs_parses_and_its_overrides_resolve(where, command):
    check_command(command)


@pytest.mark.parametrize(("where", "token", "task"), OVERRIDES, ids=[f"{w}:{t}" for w, t, _ in OVERRIDES])
def test_every_override_in_the_docs_is_valid_on_the_task_it_is_shown_for(where, token, task):
    check_override(token, task)


def test_the_override_example_of_unilab_train_help_resolves_on_the_default_task():
    epilog = train_cli.build_parser().epilog
    shown = re.findall(r"\b([a-z_]+(?:\.[a-z_]+)+=\d+|episode_length_s=\d+)", epilog)
    assert "env.rewards.velocity.weights.alive=2" in shown
    for token in shown:
        check_override(token, train_args.DEFAULTS["task"])


def test_an_override_the_docs_used_to_show_is_refused_on_the_default_task():
    with pytest.raises(ValueError, match=r"override 'rewards.alive.weight': unknown key, .*valid keys under env.rewards: "
                                         r"velocity"):
        check_override("rewards.alive.weight=2", DEFAULT_TASK)


TINY = ["batch_size=64", "learning_starts=128", "updates_per_step=1", "actor_width=32", "critic_width=32",
        "log_every=10", "replay_capacity_per_env=64"]


def readme_cpu_sequence() -> list[str]:
    """The commands of the README's CPU section, in order (continued lines joined)."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Train a G1 policy on a CPU"):text.index("## Train on one GPU")]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S)[1]
    return [line.split("   #")[0].strip() for line in re.sub(r"\\\n\s*", " ", block).splitlines() if line.strip()]


def _tiny(command: str, out: Path) -> list[str]:
    """A docs command made cheap: its budget replaced by a few steps, small networks, tmp paths."""
    argv = shlex.split(command)[1:]
    for flag in ("--minutes", "--num-envs"):
        if flag in argv:
            i = argv.index(flag)
            del argv[i:i + 2]
    argv = [a.replace("runs/", f"{out}/") for a in argv if not a.startswith(("batch_size", "learning_starts",
                                                                             "updates_per_step", "actor_width",
                                                                             "critic_width"))]
    return argv


def test_the_quick_start_chain_runs_for_real_with_tiny_budgets(tmp_path, capsys):
    """README's CPU quick start: train, play, export, eval and --config, as shown, budgets cut."""
    train = next(c for w, c in COMMANDS if w == "README.md" and c.startswith("unilab-train --task"))
    argv = _tiny(train, tmp_path) + ["--num-envs", "8", "--steps", "320", "--no-tensorboard", *TINY]
    assert train_cli.main(argv) == 0
    run = tmp_path / "quickstart"
    record = json.loads((run / "run.json").read_text())
    assert record["algo"] == "fastsac" and record["task_fingerprint"].startswith("sha256:")
    keys = set()
    for line in (run / "metrics.jsonl").read_text().splitlines():
        keys |= set(json.loads(line))
    text = (ROOT / "docs" / "training.md").read_text()
    section = text[text.index("Metrics, as a g1_walk_flat run"):text.index("### Run record")]
    for key in keys - {"env_steps", "wall_s"}:  # every metric the run wrote is in the docs' list
        family, _, name = key.rpartition("/")
        listed = f"`{key}`" in section or (
            family in ("env/reward", "env/termination") and f"`{family}/<" in section
            and re.search(rf"\b{name}\b", section) is not None)
        assert listed, key
    assert not any(k.startswith("env_log/") for k in keys)  # documented as absent for unilab's tasks

    play = next(c for w, c in COMMANDS if w == "README.md" and c.startswith("unilab-play"))
    play_argv = [a.replace("runs/", f"{tmp_path}/") for a in shlex.split(play)[1:]]
    play_argv[play_argv.index("--episodes") + 1] = "2"
    # A process of its own, as a user runs it: MuJoCo picks its GL platform once per process.
    played = subprocess.run([sys.executable, "-m", "unilab_rl.cli.play", *play_argv, "--num-envs", "2"],
                            capture_output=True, text=True, timeout=300, env={**os.environ, "MUJOCO_GL": "egl"})
    assert played.returncode == 0, played.stderr[-2000:]
    assert (run / "play.mp4").stat().st_size > 0
    export = next(c for w, c in COMMANDS if w == "README.md" and c.startswith("unilab-export"))
    assert export_cli.main([a.replace("runs/", f"{tmp_path}/") for a in shlex.split(export)[1:]]) == 0
    assert (run / "policy.onnx").exists()
    assert eval_cli.main(["--checkpoint", str(run / "checkpoint.pt"), "--no-plot", "eval.envs_per_command=1",
                          "eval.seconds=3"]) in (0, 1)
    judge_export = next(c for w, c in COMMANDS if w == "README.md" and c.startswith("unilab-eval --policy"))
    judge_argv = [a.replace("runs/", f"{tmp_path}/") for a in shlex.split(judge_export)[1:]]
    assert eval_cli.main([*judge_argv, "--no-plot", "eval.envs_per_command=1", "eval.seconds=0.4",
                          "eval.settle_s=0.1"]) in (0, 1)
    assert json.loads((run / "eval-onnx" / "report.json").read_text())["policy"] == str(run / "policy.onnx")
    # The README's CPU sequence ends on a step that passes: reading the report of a sweep that failed.
    sequence = readme_cpu_sequence()
    assert [shlex.split(c.removeprefix(".venv/bin/"))[0] for c in sequence] == [
        "unilab-train", "unilab-play", "unilab-export", "unilab-eval", "python"], sequence
    read = sequence[-1].replace(".venv/bin/python", shlex.quote(sys.executable)).replace("runs/", f"{tmp_path}/")
    shown = subprocess.run(read, shell=True, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert re.fullmatch(r"(passed|failed) \d+ of 17 commands\n", shown.stdout), shown.stdout
    again = tmp_path / "again"
    assert train_cli.main(["--config", str(run / "run.json"), "--out", str(again), "--steps", "80"]) == 0
    rerun = json.loads((again / "run.json").read_text())
    assert rerun["algo_config"] == record["algo_config"] and rerun["env_overrides"] == record["env_overrides"]
