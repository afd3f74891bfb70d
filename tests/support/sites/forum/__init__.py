"""A small forum as a site would install it from the package index: its own URLs (an application
namespace with nested ones), classic form views that show a failed form again with 200 and redirect
once a comment is saved, its own "wait 10 s" refusal (also 200), login_required views, a class-based
view, a callable instance, an async view, an AJAX like and a DRF router. Nothing in it knows the
throttle: the tests bind its views with THROTTLING_VIEWS only."""
