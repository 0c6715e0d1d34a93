from datetime import UTC, datetime

import pytest


@pytest.fixture
def at_vector_time(client_at, request):
    """The app with its clock at the time of the test module's published example request
    (its ``VECTOR_TIMESTAMP``): a client and a runtime."""
    return client_at(datetime.fromtimestamp(int(request.module.VECTOR_TIMESTAMP), UTC))
