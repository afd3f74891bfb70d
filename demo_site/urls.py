from django.contrib import admin
from django.urls import include, path

from . import api, views

api_patterns = [
    path("posts/", api.PostList.as_view(), name="api-posts"),
    path("posts/<int:pk>/", api.PostDetail.as_view(), name="api-post"),
    path("posts/<int:pk>/replies/", api.ReplyList.as_view(), name="api-replies"),
    path("posts/<int:pk>/like/", api.LikeView.as_view(), name="api-like"),
]

urlpatterns = [
    path("", views.home, name="home"),
    path("posts/<int:pk>/", views.post_detail, name="post-detail"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/", include(api_patterns)),
    path("api-auth/", include("rest_framework.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
]
