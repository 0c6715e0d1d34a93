"""Which address a request came from, behind reverse proxies or not (failed admin-token
attempts are counted per address, and the audit log names it)."""

from hooklatch.operations.access import requester

PROXIES = ("127.0.0.1", "10.0.0.0/8")


def test_a_client_that_is_no_proxy_is_its_own_address_whatever_it_writes():
    assert requester("203.0.113.7", "198.51.100.1", PROXIES) == "203.0.113.7"
    assert requester("203.0.113.7", None, PROXIES) == "203.0.113.7"


def test_behind_proxies_the_last_address_they_did_not_append_is_the_client():
    # The client wrote 198.51.100.1 itself; nginx appended 203.0.113.7, an inner proxy
    # appended the outer one's 10.0.0.5.
    forwarded = "198.51.100.1, 203.0.113.7, 10.0.0.5"
    assert requester("127.0.0.1", forwarded, PROXIES) == "203.0.113.7"


def test_a_proxy_without_the_header_or_with_garbage_in_it_is_taken_as_the_client():
    assert requester("127.0.0.1", None, PROXIES) == "127.0.0.1"
    assert requester("127.0.0.1", "not-an-address", PROXIES) == "127.0.0.1"
    assert requester("127.0.0.1", "", PROXIES) == "127.0.0.1"


def test_with_no_trusted_proxy_the_header_is_never_read():
    assert requester("127.0.0.1", "203.0.113.7", ()) == "127.0.0.1"


def test_a_proxy_on_a_unix_socket_is_trusted_whatever_the_setting():
    """gunicorn bound to a unix socket gives no peer address: nginx on this host."""
    assert requester("", "203.0.113.7", ()) == "203.0.113.7"
    assert requester(None, "198.51.100.1, 203.0.113.7", PROXIES) == "203.0.113.7"
    assert requester("", None, PROXIES) == ""


def test_an_ipv4_mapped_proxy_is_the_proxy_and_a_hop_with_a_port_is_its_address():
    """A dual-stack socket gives nginx as ::ffff:127.0.0.1; some proxies write a port."""
    assert requester("::ffff:127.0.0.1", "203.0.113.7", PROXIES) == "203.0.113.7"
    assert requester("127.0.0.1", "203.0.113.7:51234", PROXIES) == "203.0.113.7"
    assert requester("127.0.0.1", "[2001:db8::1]:443", PROXIES) == "2001:db8::1"
