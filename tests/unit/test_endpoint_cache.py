"""The per-process cache of endpoints' verification material."""

from hooklatch.endpoints.service import ActiveEndpoint, EndpointCache


def endpoint(endpoint_id, secrets=("s1",)):
    return ActiveEndpoint(id=endpoint_id, provider="stripe", secrets=list(secrets))


def test_an_endpoint_put_is_found_until_it_is_dropped():
    cache = EndpointCache()
    cache.put(endpoint("ep_a"))
    assert cache.get("ep_a") == endpoint("ep_a")
    cache.drop("ep_a")
    assert cache.get("ep_a") is None
    cache.drop("ep_a")  # dropping what is not there is not an error


def test_putting_an_endpoint_again_replaces_its_secrets():
    cache = EndpointCache()
    cache.put(endpoint("ep_a", ["old"]))
    cache.put(endpoint("ep_a", ["old", "new"]))
    entry = cache.get("ep_a")
    assert entry is not None and entry.secrets == ["old", "new"]


def test_a_full_cache_starts_afresh_rather_than_growing():
    cache = EndpointCache(size=3)
    for name in ("ep_a", "ep_b", "ep_c"):
        cache.put(endpoint(name))
    cache.put(endpoint("ep_c", ["rotated"]))  # an entry already there takes no new room
    assert cache.get("ep_a") is not None
    cache.put(endpoint("ep_d"))
    assert [cache.get(n) for n in ("ep_a", "ep_b", "ep_c")] == [None, None, None]
    assert cache.get("ep_d") == endpoint("ep_d")


def test_secrets_are_not_shown_in_its_repr():
    assert "s3cret" not in repr(endpoint("ep_a", ["s3cret"]))


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_refusals_are_rechecked_a_few_at_once_then_a_few_per_second():
    clock = Clock()
    cache = EndpointCache(recheck_burst=3, rechecks_per_second=2, clock=clock)
    cache.put(endpoint("ep_a"))
    assert [cache.may_recheck("ep_a") for _ in range(5)] == [True, True, True, False, False]
    clock.now += 0.4  # not yet a whole token
    assert not cache.may_recheck("ep_a")
    clock.now += 0.1
    assert cache.may_recheck("ep_a")
    assert not cache.may_recheck("ep_a")
    clock.now += 60  # a quiet minute refills the burst, no more
    assert [cache.may_recheck("ep_a") for _ in range(4)] == [True, True, True, False]


def test_each_endpoint_has_its_own_rechecks():
    cache = EndpointCache(recheck_burst=1, rechecks_per_second=1, clock=Clock())
    assert cache.may_recheck("ep_a")
    assert not cache.may_recheck("ep_a")
    assert cache.may_recheck("ep_b")


def test_a_full_cache_forgets_rechecks_with_its_entries():
    cache = EndpointCache(size=2, recheck_burst=1, rechecks_per_second=1, clock=Clock())
    for name in ("ep_a", "ep_b"):
        cache.put(endpoint(name))
        assert cache.may_recheck(name)
    cache.put(endpoint("ep_c"))
    assert cache._rechecks == {}
