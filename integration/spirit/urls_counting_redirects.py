"""Spirit's reply view wrapped by the decorator that counts only redirects (counts="redirect")."""

from .urls_decorated import wrapped

urlpatterns = wrapped(counts="redirect")
