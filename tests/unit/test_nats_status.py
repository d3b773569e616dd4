"""The JetStream pull's status rules and backoff (stormish.nats.client), with no server:
which statuses end a pull normally, which say the consumer or its stream is gone, and
the bounded exponential wait between pulls that end empty again and again."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from stormish.nats.client import Backoff, consumer_gone, normal_end, status_of


@pytest.mark.parametrize(
    "status, description, normal, gone",
    [
        ("408", "Request Timeout", True, False),
        ("404", "No Messages", True, False),
        ("503", "", False, True),  # no responders: no consumer (or no stream)
        ("409", "Consumer Deleted", False, True),
        ("404", "Consumer Not Found", False, True),
        ("409", "Exceeded MaxWaiting", False, False),
        ("400", "Bad Request", False, False),
    ],
)
def test_which_statuses_end_a_pull_normally_and_which_say_the_consumer_is_gone(
    status, description, normal, gone
):
    assert normal_end(status, description) is normal
    assert consumer_gone(status, description) is gone


def test_the_description_is_its_first_line_only():
    # nats-py leaves the server's next header line in the description of a 503
    msg = SimpleNamespace(headers={"Status": "503", "Description": "\nNats-Subject: $JS.X"})
    assert status_of(msg) == ("503", "")
    assert status_of(SimpleNamespace(headers=None)) == ("", "")


def test_the_backoff_doubles_up_to_its_bound_and_starts_again_after_a_reset():
    b = Backoff(0.1, 2.0)
    assert [b.delay() for _ in range(7)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0])
    b.reset()
    assert b.delay() == 0.1
