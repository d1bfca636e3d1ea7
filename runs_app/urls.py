from django.urls import URLPattern, URLResolver, path

from runs_app import mcp_state, schedule_views, views

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.home, name="home"),
    path("mcp/state/", mcp_state.mcp_state_fragment, name="mcp-state"),
    path("home/live/", views.home_live, name="home-live"),
    path("home/charts/", views.home_charts, name="home-charts"),
    path("runs/", views.run_list, name="runs-page"),
    path("runs/start/", views.run_start_view, name="run-start-page"),
    path("runs/<uuid:run_id>/", views.run_page, name="run-page"),
    path("runs/<uuid:run_id>/children/", views.run_children, name="run-children"),
    path("runs/<uuid:run_id>/detail/", views.run_detail, name="run-detail"),
    path("runs/<uuid:run_id>/controls/", views.run_controls, name="run-controls"),
    path("runs/<uuid:root_id>/nodes/", views.run_nodes, name="run-nodes"),
    path("runs/<uuid:run_id>/cancel/", views.run_cancel_view, name="run-cancel-page"),
    path("runs/<uuid:run_id>/steer/", views.run_steer_view, name="run-steer-page"),
    path("runs/<uuid:run_id>/resume/", views.run_resume_view, name="run-resume-page"),
    path("runs/<uuid:run_id>/continue/", views.run_continue_view, name="run-continue-page"),
    path("runs/<uuid:run_id>/conversation/", views.conversation_page, name="run-conversation-page"),
    path("approvals/", views.approvals_page, name="approvals-page"),
    path("approvals/live/", views.approvals_live, name="approvals-live"),
    path("approvals/bulk/", views.approvals_bulk_view, name="approvals-bulk"),
    path(
        "approvals/<int:approval_id>/<str:decision>/", views.approval_decide_view, name="approval-decide-page"
    ),
    path("tasks/", views.tasks_page, name="tasks-page"),
    path("tasks/live/", views.tasks_live, name="tasks-live"),
    path("schedules/", schedule_views.schedules_page, name="schedules-page"),
    path("schedules/preview/", schedule_views.schedule_preview, name="schedule-preview"),
    path("schedules/<int:schedule_id>/enabled/", schedule_views.schedule_enabled, name="schedule-enabled"),
    path("schedules/<int:schedule_id>/delete/", schedule_views.schedule_delete, name="schedule-delete"),
]
