from django.urls import URLPattern, URLResolver, path

from runs_app.api import health_views as hv
from runs_app.api import views as v

# Ids are matched as plain strings so that a malformed one gets the API's JSON 404 (or the
# tool's exact `Invalid task_id` message) instead of the HTML page of an unmatched URL.
urlpatterns: list[URLPattern | URLResolver] = [
    path("health/", hv.HealthApi.as_view(), name="health"),
    path("runs/", v.waits_on_loop(v.RunListApi.as_view()), name="api-runs"),
    path("runs/<str:run_id>/", v.RunDetailApi.as_view(), name="api-run-detail"),
    path("runs/<str:run_id>/tree/", v.RunTreeApi.as_view(), name="api-run-tree"),
    path("runs/<str:run_id>/events/", v.waits_on_loop(v.RunEventsApi.as_view()), name="api-run-events"),
    path("runs/<str:run_id>/transcript/", v.RunTranscriptApi.as_view(), name="api-run-transcript"),
    path("runs/<str:run_id>/spawn/", v.waits_on_loop(v.RunSpawnApi.as_view()), name="api-run-spawn"),
    path(
        "runs/<str:run_id>/delegate/",
        v.waits_on_loop(v.RunDelegateApi.as_view()),
        name="api-run-delegate",
    ),
    path("runs/<str:run_id>/cancel/", v.RunCancelApi.as_view(), name="api-run-cancel"),
    path("runs/<str:run_id>/steer/", v.RunSteerApi.as_view(), name="api-run-steer"),
    path("runs/<str:run_id>/continue/", v.RunContinueApi.as_view(), name="api-run-continue"),
    path("runs/<str:run_id>/resume/", v.RunResumeApi.as_view(), name="api-run-resume"),
    path("approvals/", v.ApprovalListApi.as_view(), name="api-approvals"),
    path("approvals/<str:approval_id>/approve/", v.ApprovalApproveApi.as_view(), name="api-approval-approve"),
    path("approvals/<str:approval_id>/deny/", v.ApprovalDenyApi.as_view(), name="api-approval-deny"),
    path("results/", v.ResultListApi.as_view(), name="api-results"),
    path("results/await/", v.waits_on_loop(v.ResultAwaitApi.as_view()), name="api-results-await"),
    path("results/<str:task_id>/", v.ResultDetailApi.as_view(), name="api-result-detail"),
    path("results/<str:task_id>/cancel/", v.ResultCancelApi.as_view(), name="api-result-cancel"),
    path("schedules/", v.ScheduleListApi.as_view(), name="api-schedules"),
    path("schedules/<str:schedule_id>/", v.ScheduleDetailApi.as_view(), name="api-schedule-detail"),
]
