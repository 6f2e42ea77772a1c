"""hive_bash.daemon.edge.connections' small parts on their own: the descriptor budget, the listening
socket's options, the open-files limit and the accept-error burst log (tests/reliability's
hostile-client tests flood the real daemon)."""

from __future__ import annotations

import resource
import socket

import pytest

from hive_bash.daemon.edge.connections import (
    ACCEPT_BACKLOG,
    OPEN_FILES_CEILING,
    ListenError,
    connection_budget,
    listening_socket,
    raise_open_files_limit,
)


@pytest.mark.parametrize(
    ("max_connections", "open_files", "budget"),
    [
        (256, 65536, (256, ACCEPT_BACKLOG)),  # the configured cap; the backlog is uvicorn's
        (256, 1024, (256, 256)),  # a quarter of 1024: exactly the cap
        (256, 400, (100, 100)),  # a quarter of the descriptors, for both
        (256, 16, (8, 8)),  # never fewer than 8
        (8, 65536, (8, ACCEPT_BACKLOG)),
    ],
)
def test_connections_get_a_quarter_of_the_descriptors_at_most(
    max_connections: int, open_files: int, budget: tuple[int, int]
) -> None:
    assert connection_budget(max_connections=max_connections, open_files=open_files) == budget


def test_the_listening_socket_defers_accept_and_is_not_inherited() -> None:
    sock = listening_socket("127.0.0.1", 0, request_timeout_secs=2.5)
    try:
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR)
        assert not sock.get_inheritable()
        if hasattr(socket, "TCP_DEFER_ACCEPT"):
            # The kernel keeps the timeout in retransmission steps: it reads back at least what was set.
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_DEFER_ACCEPT) >= 3
    finally:
        sock.close()


def test_a_port_in_use_is_refused_with_the_reason() -> None:
    with socket.socket() as occupied:
        occupied.bind(("127.0.0.1", 0))
        occupied.listen()
        port = occupied.getsockname()[1]
        with pytest.raises(ListenError, match=f"cannot listen on 127.0.0.1:{port}: Address already in use"):
            listening_socket("127.0.0.1", port, request_timeout_secs=1)


def test_an_address_that_is_not_local_is_refused_with_the_reason() -> None:
    with pytest.raises(ListenError, match="cannot listen on 192.0.2.1:7523: Cannot assign requested address"):
        listening_socket("192.0.2.1", 7523, request_timeout_secs=1)


def test_the_soft_open_files_limit_is_raised_towards_the_hard_one() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        lowered = min(soft, 512)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))
        expected = OPEN_FILES_CEILING if hard == resource.RLIM_INFINITY else min(hard, OPEN_FILES_CEILING)
        assert raise_open_files_limit() == max(expected, lowered)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == max(expected, lowered)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
