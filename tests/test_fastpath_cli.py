"""`cuco transform`: analysis printed, output written atomically, non-zero exit and nothing written on bad input."""

import shutil
from pathlib import Path

from cuco.fastpath.cli import transform_main

FIX = Path(__file__).parent / "fixtures" / "fastpath"


def test_transform_writes_output_and_says_how_verified(tmp_path, capsys):
    seed = tmp_path / "ring.cu"
    shutil.copy(FIX / "ring_threads.cu", seed)
    shutil.copy(FIX / "common_checks.h", tmp_path / "common_checks.h")
    out = tmp_path / "out" / "ring_dev.cu"
    rc = transform_main([str(seed), "-o", str(out), "--no-input-check", "--no-run"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "L34 ncclSend(sendbuff=cur" in text                      # the analysis report
    assert f"wrote {out}" in text and "compiled only (no GPU)" in text
    assert "cucoSend(cur, n, ncclInt32, next, comm, s)" in out.read_text()
    assert not list(out.parent.glob(".*.tmp"))


def test_bad_input_exits_non_zero_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "never.cu"
    rc = transform_main([str(FIX / "bad_unknown_collective.cu"), "-o", str(out), "--no-input-check"])
    err = capsys.readouterr().err
    assert rc == 2 and "ncclGather at line 9" in err
    assert not out.exists()
    rc = transform_main([str(tmp_path / "missing.cu"), "-o", str(out)])
    assert rc == 2 and "does not exist" in capsys.readouterr().err and not out.exists()


def test_unknown_model_is_refused_before_any_work(tmp_path, capsys):
    out = tmp_path / "never.cu"
    rc = transform_main([str(FIX / "bad_unknown_collective.cu"), "-o", str(out), "--model", "no-such-model-xyz"])
    assert rc == 2 and "unknown model 'no-such-model-xyz'" in capsys.readouterr().err and not out.exists()


def test_output_onto_the_input_is_refused_and_the_source_kept(tmp_path, capsys):
    seed = tmp_path / "ring.cu"
    shutil.copy(FIX / "ring_threads.cu", seed)
    before = seed.read_text()
    for out in (seed, tmp_path / "." / "ring.cu"):
        rc = transform_main([str(seed), "-o", str(out), "--no-input-check", "--no-run"])
        err = capsys.readouterr().err
        assert rc == 2 and "is the input file" in err and "ring_device.cu" in err, err
    assert seed.read_text() == before


def test_unwritable_output_is_refused_before_the_compile(tmp_path, capsys, monkeypatch):
    import cuco.fastpath.agent

    def compile_must_not_run(*_a, **_k):
        raise AssertionError("the agent ran although the output cannot be written")

    monkeypatch.setattr(cuco.fastpath.agent.FastPathAgent, "run", compile_must_not_run)
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out, why in ((afile / "x.cu", "is a file, not a directory"), (tmp_path, "is a directory")):
        rc = transform_main([str(FIX / "ring_threads.cu"), "-o", str(out), "--no-run"])
        err = capsys.readouterr().err
        assert rc == 2 and why in err and "-o" in err, err


def test_cuco_transform_shows_the_fast_paths_steps_on_stderr(tmp_path, capsys):
    import logging

    from cuco.cli import main

    log = logging.getLogger("cuco")
    saved = (list(log.handlers), log.level, log.propagate)
    seed = tmp_path / "ring.cu"
    shutil.copy(FIX / "ring_threads.cu", seed)
    shutil.copy(FIX / "common_checks.h", tmp_path / "common_checks.h")
    try:
        rc = main(["transform", str(seed), "-o", str(tmp_path / "out.cu"), "--no-input-check", "--no-run"])
    finally:
        log.handlers, log.level, log.propagate = saved
    err = capsys.readouterr().err
    assert rc == 0 and "fast path: compiling the device-initiated program (nvcc) ..." in err
    assert "fast path: compiling the device-initiated program (nvcc): done in " in err
