"""The "Throttling report" admin page (placeholder until the report lands)."""

from django.http import HttpResponse
from django.urls import path


def urls(model_admin):
    """URL patterns the penalty admin includes: admin:throttling_report and admin:throttling_report_csv."""
    site = model_admin.admin_site

    def report(request):
        return HttpResponse("report")

    return [
        path("report/", site.admin_view(report), name="throttling_report"),
        path("report.csv", site.admin_view(report), name="throttling_report_csv"),
    ]
