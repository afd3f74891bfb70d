from django import forms

from .models import Reply


class ReplyForm(forms.ModelForm):
    class Meta:
        model = Reply
        fields = ["body"]
        labels = {"body": "Your reply"}
        widgets = {"body": forms.Textarea(attrs={"rows": 4, "placeholder": "Say something kind…"})}
