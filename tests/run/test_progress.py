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


def test_the_status_shows_one_value_per_chain_separated_by_commas_not_a_fraction():
    import numpy as np

    from dpppl.run.progress import chain_status

    assert chain_status(np.array([5, 6]), np.array([-818.84, -797.41]), False) == "K=5,6 lp=-818.8,-797.4"
    assert chain_status(np.array([5]), np.array([-818.84]), True) == "K=5 lp=-818.8 (warmup)"
    assert chain_status(np.arange(1, 9), np.full(8, -1.0), False) == \
        "K=1,2,3,4,... lp=-1.0,-1.0,-1.0,-1.0,... (8 chains)"
    assert "/" not in chain_status(np.array([5, 6]), np.array([-1.0, -2.0]), False)
