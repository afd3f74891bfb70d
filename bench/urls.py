"""No routes: the benchmark calls throttles directly, but Django wants a URLconf."""

urlpatterns = []
