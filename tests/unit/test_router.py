"""Which handlers an event reaches: provider and type matched as shell-style patterns."""

from hooklatch.handlers import Router


def names(routes):
    return [route.handler.__name__ for route in routes]


def router_with_routes():
    router = Router()

    @router.on("stripe", "invoice.paid")
    def exact(event, ctx): ...

    @router.on("stripe", "invoice.*")
    def invoices(event, ctx): ...

    @router.on("stripe")
    def everything_from_stripe(event, ctx): ...

    @router.on("*", "ping")
    def pings(event, ctx): ...

    return router


def test_an_event_reaches_every_matching_handler_in_registration_order():
    routes = router_with_routes().handlers_for("stripe", "invoice.paid")
    assert names(routes) == ["exact", "invoices", "everything_from_stripe"]


def test_patterns_match_the_whole_type_not_a_prefix():
    router = router_with_routes()
    assert names(router.handlers_for("stripe", "invoice.paid.extra")) == [
        "invoices",
        "everything_from_stripe",
    ]
    assert names(router.handlers_for("stripe", "charge.invoice.paid")) == ["everything_from_stripe"]


def test_matching_is_case_sensitive_and_provider_specific():
    router = router_with_routes()
    assert names(router.handlers_for("stripe", "Invoice.Paid")) == ["everything_from_stripe"]
    assert names(router.handlers_for("github", "invoice.paid")) == []
    assert names(router.handlers_for("github", "ping")) == ["pings"]


def test_a_route_is_named_by_its_module_and_qualified_name():
    [route] = router_with_routes().handlers_for("shopify", "ping")
    assert route.name == f"{__name__}.router_with_routes.<locals>.pings"
