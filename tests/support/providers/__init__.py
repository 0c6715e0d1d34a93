"""How each sender signs a test request, one module per provider, for the conformance
kit and the tests; and what their descriptions share."""

from hooklatch.testing import ProviderConformance


def without_content_type(headers):
    """A sender's headers as a description's ``sign`` gives them: the kit adds the
    Content-Type itself."""
    return {name: value for name, value in headers.items() if name != "Content-Type"}


class SignsWithEachSecret(ProviderConformance):
    """A sender that puts one signature per active secret in a request while a secret is
    rolled: ``sign`` is ``sign_several`` with one secret."""

    several_signatures = True

    def sign(self, body, *, secret, now, url):
        return self.sign_several(body, secrets=[secret], now=now, url=url)
