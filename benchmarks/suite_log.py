"""The whole GPU suite's log at one world size, gathered from the per-file logs that `bash benchmarks/gpu_w.sh W
suite` writes (one `tests-<name>` part per GPU test file, resumable over device calls):

    python3 benchmarks/suite_log.py W LOG_DIR OUT.log
    python3 benchmarks/suite_log.py W LOG_DIR --todo COMMIT    # the parts still to run: `FILE PART` per line

OUT.log holds, per GPU test file (tests/test_*_gpu.py), its log's device line, commit and pytest summary line, then
the suite's line: every file passed at one version of the library, or which files failed, are missing or ran at
another. Files passed at several commits count as one version where git shows no change to the library (src/, csrc/)
between them (a fixed test re-run alone); the line names the commits and the devices. Where git does not know
the commits (the GPU machine's copy of the tree), the line says it cannot tell, not that the library differs. A
run that failed before the file passed is kept beside its log (`gpu_tests_<part>_w<W>.failed-<n>.log`, gpu_w.sh)
and the suite line names it: a pass on a re-run never hides the failure before it. A kept run that the part's time
limit stopped (`gpu tests: exit 124`, or 137, before any pytest summary) is named as cut off, with the test it was
in, not as a failure. A kept run of the same commit that is dated after the log it sits beside (a later device
call that did not finish the file) is named as a later run. Exit 0 when the suite
passed, else 1."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUMMARY = re.compile(r"^=+ (.*\b(passed|failed|error|errors|skipped|deselected)\b.* in [\d.]+s.*) =+$")
EXIT = re.compile(r"(?:^|\s)gpu tests: exit (\d+)$")
TIMED_OUT = (124, 137)  # timeout(1)'s exit, and a kill after it


def part_name(test_file: Path) -> str:
    """The gpu_w.sh part of a GPU test file: tests/test_workload_<w>_gpu.py -> <w>, tests/test_<n>_gpu.py -> <n>."""
    stem = test_file.stem.removesuffix("_gpu").removeprefix("test_")
    return stem.removeprefix("workload_")


def read_log(path: Path) -> dict[str, str | None]:
    """A per-file log's device line, commit, last pytest summary line and, where the part's time limit stopped it
    before any summary, `cut_off`: the test it was in (None where absent or not cut off)."""
    text = path.read_text(errors="replace") if path.is_file() else ""
    device = next((ln for ln in text.splitlines() if ln.startswith("# device:")), None)
    commit = next((ln.split()[2] for ln in text.splitlines() if ln.startswith("# commit ") and len(ln.split()) > 2),
                  None)
    summaries = [m.group(1) for ln in text.splitlines() if (m := SUMMARY.match(ln.strip()))]
    date = re.search(r"; date: (\S+)", device or "")
    exits = [(ln, m) for ln in map(str.strip, text.splitlines()) if (m := EXIT.search(ln))]
    cut_off = None
    if not summaries and exits and int(exits[-1][1].group(1)) in TIMED_OUT:
        line, m = exits[-1]
        test = line[:m.start()].strip()  # pytest's -v line of the test that was running, where there is one
        cut_off = f"cut off by the part's time limit (exit {m.group(1)})" + (f" in {test}" if test else "")
    return {"device": device, "commit": commit, "summary": summaries[-1] if summaries else None,
            "date": date.group(1) if date else None, "cut_off": cut_off}


def passed(summary: str | None) -> bool:
    """True for a pytest summary with passes and no failure or error."""
    return bool(summary) and " passed" in f" {summary}" and not re.search(r"\b\d+ (failed|errors?)\b", summary)


LIBRARY = ("src", "csrc")


def same_library(commits: list[str], repo: Path = ROOT, also: tuple[str, ...] = ()) -> bool:
    """True when git shows no change to the library (src/, csrc/), nor to the paths `also`, between the first commit
    and each other one; False where git cannot tell (an unknown commit, `+local changes`, no repository)."""
    for other in commits[1:]:
        try:
            diff = subprocess.run(["git", "-C", str(repo), "diff", "--quiet", commits[0], other, "--", *LIBRARY,
                                   *also],
                                  capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return False
        if diff.returncode != 0:   # 1: the library changed; 128: git could not read a commit
            return False
    return True


def git_knows(commits: list[str], repo: Path = ROOT) -> bool:
    """Whether git here knows every one of `commits` (a GPU machine's copy of the tree may carry no history: there
    same_library cannot tell one library from two)."""
    for c in commits:
        try:
            known = subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{c}^{{commit}}"], capture_output=True,
                                   timeout=60)
        except (OSError, subprocess.SubprocessError):
            return False
        if known.returncode != 0:
            return False
    return True


def failed_runs(world: int, log_dir: Path, name: str, commit: str | None) -> list[tuple[Path, dict]]:
    """(kept log, what read_log read from it) of each run of part `name` at `commit` that did not pass (gpu_w.sh
    keeps them before a re-run)."""
    out = []
    for path in sorted(log_dir.glob(f"gpu_tests_{name}_w{world}.failed-*.log")):
        log = read_log(path)
        if commit and log["commit"] == commit and not passed(log["summary"]):
            out.append((path, log))
    return out


def later(kept: dict, log: dict) -> bool:
    """True when a kept run is dated after the log it sits beside (ISO dates of the device lines compare as text)."""
    return bool(kept["date"] and log["date"] and kept["date"] > log["date"])


def gather(world: int, log_dir: Path, test_files: list[Path], repo: Path = ROOT) -> tuple[list[str], bool]:
    """The suite log's lines and whether every file passed at one version of the library (same_library)."""
    lines = [f"# the GPU suite at world {world}: one pytest run per GPU test file (benchmarks/gpu_w.sh {world} suite)"]
    failed, missing, cut_now, commits, devices = [], [], [], set(), Counter()
    earlier: list[str] = []
    cut: list[str] = []
    after: list[str] = []
    for f in test_files:
        name = part_name(f)
        log = read_log(log_dir / f"gpu_tests_{name}_w{world}.log")
        lines.append(f"{f.relative_to(ROOT) if f.is_relative_to(ROOT) else f}: "
                     f"{log['summary'] or log['cut_off'] or 'no summary'}"
                     f"  [{log['commit'] or 'commit ?'}; {(log['device'] or '# device: ?')[2:]}]")
        for kept, run in failed_runs(world, log_dir, name, log["commit"]):
            after_pass = later(run, log)
            lines.append(f"  {'a later' if after_pass else 'an earlier'} run at {log['commit']}: "
                         f"{run['summary'] or run['cut_off'] or 'no summary'}  [{kept.name}]")
            (after if after_pass else cut if run["cut_off"] else earlier).append(f"{name} ({kept.name})")
        if log["summary"] is None:   # the file's own run was cut off, or there is no run at all
            (cut_now if log["cut_off"] else missing).append(name)
        elif not passed(log["summary"]):
            failed.append(name)
        if log["commit"]:
            commits.add(log["commit"])
        if log["device"]:
            devices[log["device"].split(";")[0].removeprefix("# device: ")] += 1
    order = sorted(commits)
    one_version = len(order) == 1 or (len(order) > 1 and same_library(order, repo))
    ok = not failed and not missing and not cut_now and one_version
    if ok and len(order) == 1:
        lines.append(f"suite: all {len(test_files)} files passed at commit {order[0]}")
    elif ok:
        on = ", ".join(f"{d} ({n} file{'s' * (n > 1)})" for d, n in devices.most_common())
        lines.append(f"suite: all {len(test_files)} files passed at commits {', '.join(order)} (no change to "
                     f"{' or '.join(d + '/' for d in LIBRARY)} between them); devices: {on}")
    else:
        said = [f"failed: {', '.join(failed)}" if failed else "", f"no log: {', '.join(missing)}" if missing else "",
                f"cut off by the part's time limit: {', '.join(cut_now)}" if cut_now else "",
                f"commits: {', '.join(order)} ({_why_apart(order, repo)})" if len(order) > 1 else ""]
        lines.append("suite: not passed (" + "; ".join(s for s in said if s) + ")")
    if earlier:   # named whether or not the file passed since
        lines[-1] += f"; {'a run failed before passing' if ok else 'earlier failed runs'}: {', '.join(earlier)}"
    if cut:
        lines[-1] += f"; runs cut off by their part's time limit{' before passing' if ok else ''}: {', '.join(cut)}"
    if after:
        lines[-1] += f"; later runs that did not pass: {', '.join(after)}"
    return lines, ok


def _why_apart(commits: list[str], repo: Path) -> str:
    """Why files passed at these commits do not count as one library: it differs, or git here cannot say."""
    if git_knows(commits, repo):
        return "the library differs"
    return ("git here does not know every one of these commits, so it cannot tell whether the library differs: "
            "gather the log again where it does")


def seconds(summary: str | None) -> float:
    """The run time a pytest summary line states (`... in 132.14s (0:02:12)`), 0 where there is none."""
    m = re.search(r" in ([\d.]+)s", summary or "")
    return float(m.group(1)) if m else 0.0


def todo(world: int, log_dir: Path, commit: str, test_files: list[Path],
         repo: Path = ROOT) -> list[tuple[Path, str]]:
    """(file, part) of every GPU test file whose log does not show it passed at `commit`, or at a commit where git
    shows neither the library nor the test file changed since (what `suite` runs), the longest first by its last
    log's run time (shared out round-robin over lanes, that keeps them even)."""
    out = []
    for f in test_files:
        log = read_log(log_dir / f"gpu_tests_{part_name(f)}_w{world}.log")
        at = log["commit"]
        same = at == commit or (at and same_library([at, commit], repo, (str(f.relative_to(repo)),)
                                                     if f.is_relative_to(repo) else ()))
        if not (commit and same and passed(log["summary"])):
            out.append((seconds(log["summary"]), f, part_name(f)))
    return [(f, part) for _s, f, part in sorted(out, key=lambda t: -t[0])]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("world", type=int)
    ap.add_argument("log_dir", type=Path)
    ap.add_argument("out", type=Path, nargs="?")
    ap.add_argument("--todo", metavar="COMMIT", help="print `FILE PART` of each file not yet passed at COMMIT")
    a = ap.parse_args(argv)
    files = sorted((ROOT / "tests").glob("test_*_gpu.py"))
    if a.todo is not None:
        for f, part in todo(a.world, a.log_dir, a.todo, files):
            print(f.relative_to(ROOT), part)
        return 0
    if a.out is None:
        ap.error("OUT.log is needed unless --todo is given")
    lines, ok = gather(a.world, a.log_dir, files)
    a.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
