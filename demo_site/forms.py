from django import forms
from django.utils.translation import gettext_lazy as _

from .models import Reply


class ReplyForm(forms.ModelForm):
    class Meta:
        model = Reply
        fields = ["body"]
        labels = {"body": _("Your reply")}
        widgets = {"body": forms.Textarea(attrs={"rows": 4, "placeholder": _("Say something kind…")})}
