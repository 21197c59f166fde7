"""The shared CLI pieces: the loss-rate argument type both ``control`` and ``faults`` use."""

from __future__ import annotations

import argparse

import pytest

from p4rotor.cliutil import OneLineParser, loss_rate


@pytest.mark.parametrize("text,rate", [("0.1", 0.1), ("1e-4", 1e-4), ("0.999", 0.999), (" 0.5 ", 0.5)])
def test_loss_rate_takes_a_rate_in_the_open_unit_interval(text, rate):
    assert loss_rate(text) == rate


@pytest.mark.parametrize("text", ["0", "1", "-0.1", "1.5", "nan", "NaN", "inf", "-inf", "abc", "", "0.1x"])
def test_loss_rate_refuses_the_rest(text):
    with pytest.raises(argparse.ArgumentTypeError, match=r"must be a loss rate in \(0, 1\), got "):
        loss_rate(text)


@pytest.mark.parametrize("text", ["-0.5", "2", "nan", "junk"])
def test_loss_rate_flag_is_one_line_exit_2(capsys, text):
    p = OneLineParser(prog="p4rotor faults monitor")
    p.add_argument("--threshold", type=loss_rate)
    with pytest.raises(SystemExit) as ex:
        p.parse_args(["--threshold", text])
    assert ex.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"p4rotor: error: argument --threshold: must be a loss rate in (0, 1), got {text!r} "
                   "(see 'p4rotor faults monitor --help')"]
