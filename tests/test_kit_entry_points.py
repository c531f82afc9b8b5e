"""The skeleton's entry-point text: the four ABI functions, each forwarding to cuco::kit for the given type."""

from __future__ import annotations

import re

from cuco.evaluate.static import ENTRY_POINTS
from cuco.kit.entry_points import skeleton_entry_points


def test_every_abi_entry_point_forwards_to_the_skeleton_for_the_given_type():
    text = skeleton_entry_points("ns::Candidate")
    defined = set(re.findall(r'extern "C" int (cuco_candidate_\w+)\(', text))
    assert defined == set(ENTRY_POINTS)
    for step in ("requirements", "setup", "launch", "teardown"):
        assert f"cuco::kit::{step}<ns::Candidate>(" in text
