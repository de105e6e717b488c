"""``mqstore bench NAME`` passes the benchmark's own options through to its module."""

from __future__ import annotations

import pytest

from mqstore.tools.cli import main


def test_a_benchmarks_own_option_reaches_its_module_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["bench", "putpath", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: mqstore bench putpath")
    assert "--rounds" in out


def test_an_option_the_benchmark_lacks_is_refused_by_its_module_with_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["bench", "commitlog", "--quick", "--no-such-option"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "mqstore bench commitlog: error: unrecognized arguments: --no-such-option" in err
