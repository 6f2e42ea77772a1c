"""Every scenario of vm-tests/scenarios.py, run unchanged on a real kernel: in the agent's
nspawn container inside a qemu guest (tests/vm/vmdriver.py), under the module's unit.

One VM serves the module; the scenarios run in the order of ``scenarios.SCENARIOS``
(the container's reboot last). Each leaves the daemon up.
"""

from __future__ import annotations

import pytest

import scenarios

pytestmark = pytest.mark.vm
T = scenarios.Target()


@pytest.mark.parametrize("scenario", scenarios.SCENARIOS, ids=lambda f: f.__name__.removeprefix("scenario_"))
def test_scenario(scenario, agent):
    scenario(agent, T)
