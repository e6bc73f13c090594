"""The progress bar of a partition-kernel run: it says when it compiles, with the seconds, and its
elapsed time, rate and ETA count the iterations only (issue 35)."""

import time

from dpppl.run import progress
from dpppl.run.progress import RunProgress


def test_a_first_call_shows_compiling_and_is_left_out_of_the_rate(capsys, monkeypatch):
    monkeypatch.setattr(progress, "_RAN", set())
    display = RunProgress(100, 0, True, "gibbs")
    display.bar.mininterval = 0  # draw at every change
    started = display.bar.start_t
    with display.compiling("program", "the sampling program"):
        time.sleep(0.3)  # a compile: the bar says so while it runs
    assert "compiling the sampling program: 0 s" in capsys.readouterr().err
    assert display.bar.start_t - started >= 0.3  # the bar's clock skipped the compile: not in its elapsed time
    display.update(10, "K=2")
    assert "10/100" in capsys.readouterr().err
    with display.compiling("program", "the sampling program"):  # it has run: nothing to say
        pass
    assert "compiling" not in capsys.readouterr().err
    display.close()


def test_no_bar_shows_nothing_and_still_remembers_what_ran(capsys, monkeypatch):
    monkeypatch.setattr(progress, "_RAN", set())
    display = RunProgress(10, 0, False, "gibbs")
    with display.compiling("other", "the warmup program"):
        pass
    display.update(3, "K=1")
    display.close()
    assert capsys.readouterr().err == "" and "other" in progress._RAN
