"""Failure notices to tenants: what went wrong with a tenant's jobs, told on its channels.

- ``channels``: a tenant's notification channels (a signed webhook, an e-mail address),
  checked when written (the webhook's URL by the target URL rule and address guard);
- ``outbox``: the events (written by triggers in the transaction of their cause:
  functions/notice_jobs.sql, notice_runs.sql), composed into messages at most one per channel
  and job an hour (a digest beyond that), and the reads the API, the CLI and the console
  share;
- ``message``: what a message says, as a webhook's JSON body and as an e-mail (pure);
- ``sender``: the maintenance leader's service that composes and sends, retried with
  backoff; it never runs in a worker's slots, so a slow channel never holds a run.

The sender sits above the worker's layer because it sends webhooks as the worker does
(``worker/targets/http.py``: the same signature, the same address guard at connect time);
the maintenance leader runs it as a service handed to it by the command line
(``MaintenanceConfig.notices``), so the maintenance layer does not import it.
"""
