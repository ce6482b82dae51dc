--
-- PostgreSQL database dump
--

\restrict wfctl02

-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: wfctl_count_instances(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.wfctl_count_instances() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        INSERT INTO instance_counts (workflow_type, status, slot, count)
        VALUES (OLD.workflow_type, OLD.status, OLD.family_key % 16, -1)
        ON CONFLICT (workflow_type, status, slot)
        DO UPDATE SET count = instance_counts.count - 1;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO instance_counts (workflow_type, status, slot, count)
        VALUES (NEW.workflow_type, NEW.status, NEW.family_key % 16, 1)
        ON CONFLICT (workflow_type, status, slot)
        DO UPDATE SET count = instance_counts.count + 1;
    END IF;
    RETURN NULL;
END $$;


--
-- Name: wfctl_family_key(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.wfctl_family_key() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    NEW.family_key := coalesce((SELECT family_key FROM instances
                                WHERE workflow_instance_id = NEW.parent_instance_id),
                               NEW.instance_key);
    RETURN NEW;
END $$;


--
-- Name: wfctl_history_is_append_only(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.wfctl_history_is_append_only() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'DELETE' AND (
            NOT EXISTS (SELECT 1 FROM instances WHERE instance_key = OLD.instance_key)
            OR EXISTS (SELECT 1 FROM pruning WHERE instance_key = OLD.instance_key)) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'history is append-only';
END $$;


--
-- Name: wfctl_lock_family(bigint, boolean); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.wfctl_lock_family(family bigint, wait boolean) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF wait THEN
        PERFORM pg_advisory_xact_lock(family);
        RETURN true;
    END IF;
    RETURN pg_try_advisory_xact_lock(family);
END $$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: activities; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.activities (
    activity_id text NOT NULL,
    workflow_run_id text NOT NULL,
    workflow_instance_id text NOT NULL,
    step_index integer NOT NULL,
    branch_index integer NOT NULL,
    step text NOT NULL,
    handler text NOT NULL,
    queue text NOT NULL,
    status text NOT NULL,
    attempt integer NOT NULL,
    max_attempts integer NOT NULL,
    retry_policy text NOT NULL,
    available_at timestamp with time zone NOT NULL,
    scheduled_at timestamp with time zone NOT NULL,
    schedule_deadline_at timestamp with time zone,
    close_deadline_at timestamp with time zone,
    schedule_to_close_deadline_at timestamp with time zone,
    heartbeat_deadline_at timestamp with time zone,
    started_at timestamp with time zone,
    owner text,
    last_heartbeat_at timestamp with time zone,
    last_heartbeat_details text,
    last_heartbeat_event_at timestamp with time zone,
    scheduled_event_id integer NOT NULL,
    started_event_id integer,
    last_error text,
    superseded integer DEFAULT 0 NOT NULL,
    closed_at timestamp with time zone,
    rowid bigint NOT NULL
);


--
-- Name: activities_rowid_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.activities ALTER COLUMN rowid ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.activities_rowid_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: children; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.children (
    child_instance_id text NOT NULL,
    parent_instance_id text NOT NULL,
    parent_run_id text NOT NULL,
    step_index integer NOT NULL,
    branch_index integer NOT NULL,
    step text NOT NULL,
    workflow_type text NOT NULL,
    started_event_id integer NOT NULL,
    superseded integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone NOT NULL,
    rowid bigint NOT NULL
);


--
-- Name: children_rowid_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.children ALTER COLUMN rowid ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.children_rowid_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: definitions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.definitions (
    digest text NOT NULL,
    path text NOT NULL,
    source text NOT NULL,
    created_at timestamp with time zone NOT NULL
);


--
-- Name: events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.events (
    instance_key bigint NOT NULL,
    seq integer NOT NULL,
    run_number integer NOT NULL,
    event_type smallint NOT NULL,
    at bigint NOT NULL,
    attributes text NOT NULL
);


--
-- Name: failures; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.failures (
    failure_id bigint NOT NULL,
    workflow_instance_id text NOT NULL,
    workflow_run_id text NOT NULL,
    activity_id text,
    failure_category text NOT NULL,
    propagation_kind text,
    timeout_kind text,
    exception_class text,
    message text NOT NULL,
    deadline_at timestamp with time zone,
    details text,
    created_at timestamp with time zone NOT NULL
);


--
-- Name: failures_failure_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.failures ALTER COLUMN failure_id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME public.failures_failure_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: instance_counts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.instance_counts (
    workflow_type text NOT NULL,
    status text NOT NULL,
    count bigint NOT NULL,
    slot smallint DEFAULT 0 NOT NULL
);


--
-- Name: instances; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.instances (
    workflow_instance_id text NOT NULL COLLATE pg_catalog."C",
    workflow_type text NOT NULL,
    definitions_digest text NOT NULL,
    status text NOT NULL,
    current_run_id text NOT NULL,
    run_count integer NOT NULL,
    execution_timeout_seconds double precision,
    deadline_seconds double precision,
    deadline_at timestamp with time zone,
    on_deadline text,
    child_policy text NOT NULL,
    parent_instance_id text,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    closed_at timestamp with time zone,
    child_depth integer DEFAULT 0 NOT NULL,
    instance_key bigint NOT NULL,
    retry_policy text,
    retain_until timestamp with time zone,
    family_key bigint NOT NULL
);


--
-- Name: instances_instance_key_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.instances ALTER COLUMN instance_key ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME public.instances_instance_key_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: pruning; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.pruning (
    workflow_instance_id text NOT NULL COLLATE pg_catalog."C",
    instance_key bigint NOT NULL,
    started_at timestamp with time zone NOT NULL
);


--
-- Name: runs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.runs (
    workflow_run_id text NOT NULL,
    workflow_instance_id text NOT NULL,
    run_number integer NOT NULL,
    status text NOT NULL,
    closed_reason text,
    run_timeout_seconds double precision,
    execution_deadline_at timestamp with time zone,
    run_deadline_at timestamp with time zone,
    workflow_task_timeout_seconds double precision,
    deadline_at timestamp with time zone,
    deadline_claimed_by text,
    deadline_claimed_at timestamp with time zone,
    step_index integer DEFAULT 0 NOT NULL,
    step_started integer DEFAULT 0 NOT NULL,
    wait_kind text,
    cancel_requested integer DEFAULT 0 NOT NULL,
    state text NOT NULL,
    first_seq integer NOT NULL,
    failure_id bigint,
    continued_to_run_id text,
    started_at timestamp with time zone NOT NULL,
    closed_at timestamp with time zone,
    rejected_starts integer DEFAULT 0 NOT NULL,
    retry_attempt integer DEFAULT 1 NOT NULL
);


--
-- Name: signals; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.signals (
    signal_id bigint NOT NULL,
    workflow_instance_id text NOT NULL,
    name text NOT NULL,
    data text,
    received_at timestamp with time zone NOT NULL,
    received_event_id integer NOT NULL,
    consumed_run_id text,
    consumed_step_index integer,
    consumed_at timestamp with time zone
);


--
-- Name: signals_signal_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.signals ALTER COLUMN signal_id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME public.signals_signal_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: timeout_event_counts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.timeout_event_counts (
    event_type text NOT NULL,
    timeout_kind text NOT NULL,
    failure_category text NOT NULL,
    count bigint NOT NULL
);


--
-- Name: timers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.timers (
    timer_id text NOT NULL,
    workflow_run_id text NOT NULL,
    workflow_instance_id text NOT NULL,
    step_index integer NOT NULL,
    step text NOT NULL,
    kind text NOT NULL,
    fire_at timestamp with time zone NOT NULL,
    status text NOT NULL,
    scheduled_event_id integer NOT NULL,
    superseded integer DEFAULT 0 NOT NULL,
    closed_at timestamp with time zone,
    rowid bigint NOT NULL
);


--
-- Name: timers_rowid_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.timers ALTER COLUMN rowid ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.timers_rowid_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: wfctl_migrations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.wfctl_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);


--
-- Name: workers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.workers (
    worker_id text NOT NULL,
    kind text NOT NULL,
    hostname text NOT NULL,
    pid integer NOT NULL,
    pid_started text,
    queues text NOT NULL,
    started_at timestamp with time zone NOT NULL,
    heartbeat_at timestamp with time zone NOT NULL,
    lease_expires_at timestamp with time zone NOT NULL,
    stopped_at timestamp with time zone,
    host_id text
);


--
-- Name: workflow_tasks; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.workflow_tasks (
    task_id bigint NOT NULL,
    workflow_run_id text NOT NULL,
    workflow_instance_id text NOT NULL,
    status text NOT NULL,
    reason text NOT NULL,
    available_at timestamp with time zone NOT NULL,
    scheduled_event_id integer NOT NULL,
    started_event_id integer,
    owner text,
    started_at timestamp with time zone,
    timeout_at timestamp with time zone,
    closed_at timestamp with time zone
);


--
-- Name: workflow_tasks_task_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.workflow_tasks ALTER COLUMN task_id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME public.workflow_tasks_task_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Data for Name: activities; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.activities (activity_id, workflow_run_id, workflow_instance_id, step_index, branch_index, step, handler, queue, status, attempt, max_attempts, retry_policy, available_at, scheduled_at, schedule_deadline_at, close_deadline_at, schedule_to_close_deadline_at, heartbeat_deadline_at, started_at, owner, last_heartbeat_at, last_heartbeat_details, last_heartbeat_event_at, scheduled_event_id, started_event_id, last_error, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('09f6b9309952e040', 'e2c9321862bc7015', 'retried', 0, 0, 'load', 'v02_handlers:load', 'default', 'failed', 1, 1, '[1,[60],null,3600,null,null,[]]', '2026-04-12 11:14:01+00', '2026-04-12 11:14:01+00', NULL, '2026-04-12 12:14:02+00', NULL, NULL, '2026-04-12 11:14:02+00', NULL, NULL, NULL, NULL, 5, 6, '{"exception_class":"ConnectionError","message":"warehouse unreachable"}', 0, '2026-04-12 11:14:02+00', 10);
INSERT INTO public.activities (activity_id, workflow_run_id, workflow_instance_id, step_index, branch_index, step, handler, queue, status, attempt, max_attempts, retry_policy, available_at, scheduled_at, schedule_deadline_at, close_deadline_at, schedule_to_close_deadline_at, heartbeat_deadline_at, started_at, owner, last_heartbeat_at, last_heartbeat_details, last_heartbeat_event_at, scheduled_event_id, started_event_id, last_error, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('1662211e0d27dbe7', 'e444d12938a6bb9f', 'continued', 0, 0, 'poll', 'v02_handlers:poll', 'default', 'completed', 1, 3, '[3,[60,120,240],null,3600,null,null,[]]', '2026-04-12 11:15:01+00', '2026-04-12 11:15:01+00', NULL, '2026-04-12 12:15:02+00', NULL, NULL, '2026-04-12 11:15:02+00', NULL, NULL, NULL, NULL, 5, 6, NULL, 0, '2026-04-12 11:15:02+00', 12);
INSERT INTO public.activities (activity_id, workflow_run_id, workflow_instance_id, step_index, branch_index, step, handler, queue, status, attempt, max_attempts, retry_policy, available_at, scheduled_at, schedule_deadline_at, close_deadline_at, schedule_to_close_deadline_at, heartbeat_deadline_at, started_at, owner, last_heartbeat_at, last_heartbeat_details, last_heartbeat_event_at, scheduled_event_id, started_event_id, last_error, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('1ce3bd92b5cf1d3e', '67f4da1416ead234', 'lost-attempt', 0, 0, 'fetch', 'v02_handlers:fetch', 'default', 'started', 1, 3, '[3,[60,120,240],null,3600,null,null,[]]', '2026-04-12 11:13:01+00', '2026-04-12 11:13:01+00', NULL, '2026-04-12 12:13:02+00', NULL, NULL, '2026-04-12 11:13:02+00', 'v01-gone:2002:lost', '2026-04-12 11:13:05+00', '{"fetched":120}', '2026-04-12 11:13:05+00', 5, 6, NULL, 0, NULL, 9);
INSERT INTO public.activities (activity_id, workflow_run_id, workflow_instance_id, step_index, branch_index, step, handler, queue, status, attempt, max_attempts, retry_policy, available_at, scheduled_at, schedule_deadline_at, close_deadline_at, schedule_to_close_deadline_at, heartbeat_deadline_at, started_at, owner, last_heartbeat_at, last_heartbeat_details, last_heartbeat_event_at, scheduled_event_id, started_event_id, last_error, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('2b0d8442d7e78bac', '14ee94e7b163b526', 'cancelled', 0, 0, 'fetch', 'v02_handlers:fetch', 'default', 'cancelled', 1, 3, '[3,[60,120,240],null,3600,null,null,[]]', '2026-04-12 11:01:01+00', '2026-04-12 11:01:01+00', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 5, NULL, NULL, 0, '2026-04-12 11:01:03+00', 3);
INSERT INTO public.activities (activity_id, workflow_run_id, workflow_instance_id, step_index, branch_index, step, handler, queue, status, attempt, max_attempts, retry_policy, available_at, scheduled_at, schedule_deadline_at, close_deadline_at, schedule_to_close_deadline_at, heartbeat_deadline_at, started_at, owner, last_heartbeat_at, last_heartbeat_details, last_heartbeat_event_at, scheduled_event_id, started_event_id, last_error, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('2e36b4b08e85bc41', '1ba6914863a3184e', 'kept', 0, 0, 'store', 'v02_handlers:store', 'default', 'completed', 1, 3, '[3,[60,120,240],null,3600,null,null,[]]', '2026-04-12 11:14:21+00', '2026-04-12 11:14:21+00', NULL, '2026-04-12 12:14:22+00', NULL, NULL, '2026-04-12 11:14:22+00', NULL, NULL, NULL, NULL, 5, 6, NULL, 0, '2026-04-12 11:14:22+00', 11);
INSERT INTO public.activities (activity_id, workflow_run_id, workflow_instance_id, step_index, branch_index, step, handler, queue, status, attempt, max_attempts, retry_policy, available_at, scheduled_at, schedule_deadline_at, close_deadline_at, schedule_to_close_deadline_at, heartbeat_deadline_at, started_at, owner, last_heartbeat_at, last_heartbeat_details, last_heartbeat_event_at, scheduled_event_id, started_event_id, last_error, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('3b5aaeafe0cf63c9', '6800d8e7046a09b9', 'completed', 0, 0, 'fetch', 'v02_handlers:fetch', 'default', 'completed', 1, 3, '[3,[60,120,240],null,3600,null,null,[]]', '2026-04-12 11:00:01+00', '2026-04-12 11:00:01+00', NULL, '2026-04-12 12:00:01+00', NULL, NULL, '2026-04-12 11:00:01+00', NULL, NULL, NULL, NULL, 5, 6, NULL, 0, '2026-04-12 11:00:01+00', 1);
INSERT INTO public.activities (activity_id, workflow_run_id, workflow_instance_id, step_index, branch_index, step, handler, queue, status, attempt, max_attempts, retry_policy, available_at, scheduled_at, schedule_deadline_at, close_deadline_at, schedule_to_close_deadline_at, heartbeat_deadline_at, started_at, owner, last_heartbeat_at, last_heartbeat_details, last_heartbeat_event_at, scheduled_event_id, started_event_id, last_error, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('4a0e88728ab010e8', '56238899d6aca6b8', 'fanout', 0, 0, 'fetch', 'v02_handlers:fetch', 'default', 'scheduled', 1, 3, '[3,[60,120,240],null,3600,null,null,[]]', '2026-04-12 11:18:31+00', '2026-04-12 11:18:31+00', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 5, NULL, NULL, 0, NULL, 17);
INSERT INTO public.activities (activity_id, workflow_run_id, workflow_instance_id, step_index, branch_index, step, handler, queue, status, attempt, max_attempts, retry_policy, available_at, scheduled_at, schedule_deadline_at, close_deadline_at, schedule_to_close_deadline_at, heartbeat_deadline_at, started_at, owner, last_heartbeat_at, last_heartbeat_details, last_heartbeat_event_at, scheduled_event_id, started_event_id, last_error, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('4af339c4404c45e1', '6800d8e7046a09b9', 'completed', 1, 0, 'store', 'v02_handlers:store', 'default', 'completed', 1, 3, '[3,[60,120,240],null,3600,null,null,[]]', '2026-04-12 11:00:01+00', '2026-04-12 11:00:01+00', NULL, '2026-04-12 12:00:01+00', NULL, NULL, '2026-04-12 11:00:01+00', NULL, NULL, NULL, NULL, 11, 12, NULL, 0, '2026-04-12 11:00:01+00', 2);
INSERT INTO public.activities (activity_id, workflow_run_id, workflow_instance_id, step_index, branch_index, step, handler, queue, status, attempt, max_attempts, retry_policy, available_at, scheduled_at, schedule_deadline_at, close_deadline_at, schedule_to_close_deadline_at, heartbeat_deadline_at, started_at, owner, last_heartbeat_at, last_heartbeat_details, last_heartbeat_event_at, scheduled_event_id, started_event_id, last_error, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('52416a35d0262733', '9ced0b731ba47769', 'far-deadline', 0, 0, 'fetch', 'v02_handlers:fetch', 'default', 'completed', 1, 3, '[3,[60,120,240],null,3600,null,null,[]]', '2026-04-12 11:09:01+00', '2026-04-12 11:09:01+00', NULL, '2026-04-12 12:09:01+00', NULL, NULL, '2026-04-12 11:09:01+00', NULL, NULL, NULL, NULL, 5, 6, NULL, 0, '2026-04-12 11:09:01+00', 6);
INSERT INTO public.activities (activity_id, workflow_run_id, workflow_instance_id, step_index, branch_index, step, handler, queue, status, attempt, max_attempts, retry_policy, available_at, scheduled_at, schedule_deadline_at, close_deadline_at, schedule_to_close_deadline_at, heartbeat_deadline_at, started_at, owner, last_heartbeat_at, last_heartbeat_details, last_heartbeat_event_at, scheduled_event_id, started_event_id, last_error, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('56e3afa0beca9184', 'f83c686d4dc7bc17', 'paused', 0, 0, 'fetch', 'v02_handlers:fetch', 'default', 'completed', 1, 3, '[3,[60,120,240],null,3600,null,null,[]]', '2026-04-12 11:11:01+00', '2026-04-12 11:11:01+00', NULL, '2026-04-12 12:11:02+00', NULL, NULL, '2026-04-12 11:11:02+00', NULL, NULL, NULL, NULL, 5, 6, NULL, 0, '2026-04-12 11:11:04+00', 7);
INSERT INTO public.activities (activity_id, workflow_run_id, workflow_instance_id, step_index, branch_index, step, handler, queue, status, attempt, max_attempts, retry_policy, available_at, scheduled_at, schedule_deadline_at, close_deadline_at, schedule_to_close_deadline_at, heartbeat_deadline_at, started_at, owner, last_heartbeat_at, last_heartbeat_details, last_heartbeat_event_at, scheduled_event_id, started_event_id, last_error, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('658199a583c7fa55', '2c100a23801bddb1', 'buffered', 0, 0, 'prepare', 'v02_handlers:prepare', 'default', 'scheduled', 1, 3, '[3,[60,120,240],null,3600,null,null,[]]', '2026-04-12 11:18:01+00', '2026-04-12 11:18:01+00', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 5, NULL, NULL, 0, NULL, 16);
INSERT INTO public.activities (activity_id, workflow_run_id, workflow_instance_id, step_index, branch_index, step, handler, queue, status, attempt, max_attempts, retry_policy, available_at, scheduled_at, schedule_deadline_at, close_deadline_at, schedule_to_close_deadline_at, heartbeat_deadline_at, started_at, owner, last_heartbeat_at, last_heartbeat_details, last_heartbeat_event_at, scheduled_event_id, started_event_id, last_error, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('6c1ab3516da37279', 'b9726e1ad30e0520', 'timer', 0, 0, 'fetch', 'v02_handlers:fetch', 'default', 'completed', 1, 3, '[3,[60,120,240],null,3600,null,null,[]]', '2026-04-12 11:08:01+00', '2026-04-12 11:08:01+00', NULL, '2026-04-12 12:08:01+00', NULL, NULL, '2026-04-12 11:08:01+00', NULL, NULL, NULL, NULL, 5, 6, NULL, 0, '2026-04-12 11:08:01+00', 5);
INSERT INTO public.activities (activity_id, workflow_run_id, workflow_instance_id, step_index, branch_index, step, handler, queue, status, attempt, max_attempts, retry_policy, available_at, scheduled_at, schedule_deadline_at, close_deadline_at, schedule_to_close_deadline_at, heartbeat_deadline_at, started_at, owner, last_heartbeat_at, last_heartbeat_details, last_heartbeat_event_at, scheduled_event_id, started_event_id, last_error, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('7b013c380726ed92', '42ceeedb07a456d7', 'queued', 0, 0, 'fetch', 'v02_handlers:fetch', 'default', 'scheduled', 1, 3, '[3,[60,120,240],null,3600,null,null,[]]', '2026-04-12 11:16:01+00', '2026-04-12 11:16:01+00', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 5, NULL, NULL, 0, NULL, 14);
INSERT INTO public.activities (activity_id, workflow_run_id, workflow_instance_id, step_index, branch_index, step, handler, queue, status, attempt, max_attempts, retry_policy, available_at, scheduled_at, schedule_deadline_at, close_deadline_at, schedule_to_close_deadline_at, heartbeat_deadline_at, started_at, owner, last_heartbeat_at, last_heartbeat_details, last_heartbeat_event_at, scheduled_event_id, started_event_id, last_error, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('b2ef43df0b3cd253', '7685aae764fcfc19', 'failed', 0, 0, 'load', 'v02_handlers:load', 'default', 'failed', 1, 1, '[1,[60],null,3600,null,null,[]]', '2026-04-12 11:03:01+00', '2026-04-12 11:03:01+00', NULL, '2026-04-12 12:03:02+00', NULL, NULL, '2026-04-12 11:03:02+00', NULL, NULL, NULL, NULL, 5, 6, '{"exception_class":"ConnectionError","message":"warehouse unreachable"}', 0, '2026-04-12 11:03:02+00', 4);
INSERT INTO public.activities (activity_id, workflow_run_id, workflow_instance_id, step_index, branch_index, step, handler, queue, status, attempt, max_attempts, retry_policy, available_at, scheduled_at, schedule_deadline_at, close_deadline_at, schedule_to_close_deadline_at, heartbeat_deadline_at, started_at, owner, last_heartbeat_at, last_heartbeat_details, last_heartbeat_event_at, scheduled_event_id, started_event_id, last_error, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('d33daeb48bc7e43b', '87ebf90546607e44', 'continued', 0, 0, 'poll', 'v02_handlers:poll', 'default', 'scheduled', 1, 3, '[3,[60,120,240],null,3600,null,null,[]]', '2026-04-12 11:15:03+00', '2026-04-12 11:15:03+00', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 16, NULL, NULL, 0, NULL, 13);
INSERT INTO public.activities (activity_id, workflow_run_id, workflow_instance_id, step_index, branch_index, step, handler, queue, status, attempt, max_attempts, retry_policy, available_at, scheduled_at, schedule_deadline_at, close_deadline_at, schedule_to_close_deadline_at, heartbeat_deadline_at, started_at, owner, last_heartbeat_at, last_heartbeat_details, last_heartbeat_event_at, scheduled_event_id, started_event_id, last_error, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('e7b1fd4c28a28647', '707115a546cc1f9e', 'parent.import.bfa95203', 0, 0, 'fetch', 'v02_handlers:fetch', 'default', 'scheduled', 1, 3, '[3,[60,120,240],null,3600,null,null,[]]', '2026-04-12 11:17:01+00', '2026-04-12 11:17:01+00', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 5, NULL, NULL, 0, NULL, 15);
INSERT INTO public.activities (activity_id, workflow_run_id, workflow_instance_id, step_index, branch_index, step, handler, queue, status, attempt, max_attempts, retry_policy, available_at, scheduled_at, schedule_deadline_at, close_deadline_at, schedule_to_close_deadline_at, heartbeat_deadline_at, started_at, owner, last_heartbeat_at, last_heartbeat_details, last_heartbeat_event_at, scheduled_event_id, started_event_id, last_error, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('e827fb7d5cb0a967', 'b2d23ace93f575d7', 'backoff', 0, 0, 'fail_first', 'v02_handlers:fail_first', 'default', 'retry_scheduled', 2, 3, '[3,[3600],null,3600,null,null,[]]', '2026-04-12 12:12:01+00', '2026-04-12 11:12:01+00', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 5, NULL, '{"exception_class":"ConnectionError","message":"upstream refused the first attempt","traceback":"Traceback (most recent call last):\n  File \"/tmp/wfctl-0.2/wfctl/handlers.py\", line 154, in run\n    returned = call(spec, state, ctx)\n               ^^^^^^^^^^^^^^^^^^^^^^\n  File \"/tmp/wfctl-0.2/wfctl/handlers.py\", line 75, in call\n    return function(state, ctx) if with_context else function(state)\n           ^^^^^^^^^^^^^^^^^^^^\n  File \"/work/main/tests/data/v02/v02_handlers.py\", line 36, in fail_first\n    raise ConnectionError(\"upstream refused the first attempt\")\nConnectionError: upstream refused the first attempt\n"}', 0, NULL, 8);
INSERT INTO public.activities (activity_id, workflow_run_id, workflow_instance_id, step_index, branch_index, step, handler, queue, status, attempt, max_attempts, retry_policy, available_at, scheduled_at, schedule_deadline_at, close_deadline_at, schedule_to_close_deadline_at, heartbeat_deadline_at, started_at, owner, last_heartbeat_at, last_heartbeat_details, last_heartbeat_event_at, scheduled_event_id, started_event_id, last_error, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('eae02b27436324ec', '56238899d6aca6b8', 'fanout', 0, 1, 'store', 'v02_handlers:store', 'default', 'scheduled', 1, 3, '[3,[60,120,240],null,3600,null,null,[]]', '2026-04-12 11:18:31+00', '2026-04-12 11:18:31+00', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 6, NULL, NULL, 0, NULL, 18);


--
-- Data for Name: children; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.children (child_instance_id, parent_instance_id, parent_run_id, step_index, branch_index, step, workflow_type, started_event_id, superseded, created_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('parent.import.bfa95203', 'parent', 'af58d13c81d5560e', 0, 0, 'import', 'ingest', 5, 0, '2026-04-12 11:17:01+00', 1);


--
-- Data for Name: definitions; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.definitions (digest, path, source, created_at) VALUES ('e681906589e3aa58', 'workflows.yaml', '# The definitions tests/data/v02.db was made with (by tests/data/make_v02_db.py, on wfctl 0.2).
# The database keeps its own copy; tests/test_upgrade.py opens it with this file beside it,
# so that v02_handlers imports. Changing either file means making the database again.
version: 1
defaults:
  activity:
    start_to_close: 1h
    max_attempts: 3
    backoff: {initial: 1m, coefficient: 2.0, max: 10m}
workflows:
  ingest:
    steps:
      - activity: v02_handlers:fetch
      - activity: v02_handlers:store
  approval:
    steps:
      - wait_for_signal: approved
      - activity: v02_handlers:publish
  approval_timed:
    steps:
      - wait_for_signal: approved
        timeout: 2h
      - activity: v02_handlers:publish
  review:
    steps:
      - activity: v02_handlers:prepare
      - wait_for_signal: go
      - activity: v02_handlers:publish
  report:
    run_timeout: 1m
    steps:
      - wait_for_signal: data_ready
      - activity: v02_handlers:publish
  nightly:
    steps:
      - activity: v02_handlers:fetch
      - delay: 2h
      - activity: v02_handlers:store
  escalation:
    deadline: {hours: 2}
    on_deadline: v02_handlers:escalate
    steps:
      - delay: 1d
      - activity: v02_handlers:store
  loader:
    steps:
      - activity: v02_handlers:load
        max_attempts: 1
  flaky:
    steps:
      - activity: v02_handlers:fail_first
        backoff: [1h]
  poller:
    execution_timeout: 30d
    steps:
      - activity: v02_handlers:poll
      - continue_as_new: {while: more}
  batch:
    child_policy: terminate
    steps:
      - workflow: ingest
        name: import
      - activity: v02_handlers:summarize
  # What 0.2 added: a workflow retry policy, retention, parallel branches.
  retried:
    retry: {max_attempts: 3, backoff: [1h]}
    steps:
      - activity: v02_handlers:load
        max_attempts: 1
      - activity: v02_handlers:store
  kept:
    retention: 30d
    steps:
      - activity: v02_handlers:store
  fanout:
    steps:
      - parallel:
          - activity: v02_handlers:fetch
          - activity: v02_handlers:store
      - activity: v02_handlers:publish
', '2026-04-12 11:00:00+00');


--
-- Data for Name: events; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (1, 1, 1, 1, 1775991600000000, '[-4,"ingest",{"rows":7},null,null,null,"abandon",null,1,"6800d8e7046a09b9",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (1, 10, 1, 4, 1775991601000000, '[-3,8,9]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (1, 11, 1, 6, 1775991601000000, '[-5,"4af339c4404c45e1","store","v02_handlers:store","default",1,3,[3,[60,120,240],null,3600,null,null,[]],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (1, 12, 1, 7, 1775991601000000, '[-6,"4af339c4404c45e1","store",1,"v01-host:1001:worker",11,[3600000000],null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (1, 13, 1, 9, 1775991601000000, '[-7,"4af339c4404c45e1","store",1,11,12,{"stored":7}]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (1, 14, 1, 2, 1775991601000000, '[-1,"activity_completed"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (1, 15, 1, 3, 1775991601000000, '[-2,14,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (1, 16, 1, 4, 1775991601000000, '[-3,14,15]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (1, 17, 1, 29, 1775991601000000, '[-8,["fetch_attempt","resumed_from","rows","stored"]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (1, 2, 1, 2, 1775991600000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (1, 3, 1, 3, 1775991601000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (1, 4, 1, 4, 1775991601000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (1, 5, 1, 6, 1775991601000000, '[-5,"3b5aaeafe0cf63c9","fetch","v02_handlers:fetch","default",1,3,[3,[60,120,240],null,3600,null,null,[]],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (1, 6, 1, 7, 1775991601000000, '[-6,"3b5aaeafe0cf63c9","fetch",1,"v01-host:1001:worker",5,[3600000000],null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (1, 7, 1, 9, 1775991601000000, '[-7,"3b5aaeafe0cf63c9","fetch",1,5,6,{"rows":7,"resumed_from":0,"fetch_attempt":1}]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (1, 8, 1, 2, 1775991601000000, '[-1,"activity_completed"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (1, 9, 1, 3, 1775991601000000, '[-2,8,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (10, 1, 1, 1, 1775992200000000, '[-4,"escalation",{"ticket":"T-7"},null,7200,"v02_handlers:escalate","abandon",null,1,"c75b9ce8a9c46aae",null,10,null,null,[7200000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (10, 2, 1, 2, 1775992200000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (10, 3, 1, 3, 1775992201000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (10, 4, 1, 4, 1775992201000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (10, 5, 1, 14, 1775992201000000, '[-9,"7ed6e755cd612854","delay 1d","delay",86400,[86400000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (11, 1, 1, 1, 1775992260000000, '[-4,"ingest",{},null,null,null,"abandon",null,1,"f83c686d4dc7bc17",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (11, 10, 1, 3, 1775992264000000, '[-2,9,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (11, 11, 1, 4, 1775992264000000, '[-3,9,10]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (11, 2, 1, 2, 1775992260000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (11, 3, 1, 3, 1775992261000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (11, 4, 1, 4, 1775992261000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (11, 5, 1, 6, 1775992261000000, '[-5,"56e3afa0beca9184","fetch","v02_handlers:fetch","default",1,3,[3,[60,120,240],null,3600,null,null,[]],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (11, 6, 1, 7, 1775992262000000, '[-6,"56e3afa0beca9184","fetch",1,"v01-host:1001:worker",5,[3600000000],null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (11, 7, 1, 24, 1775992263000000, '[]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (11, 8, 1, 9, 1775992264000000, '[-7,"56e3afa0beca9184","fetch",1,5,6,{"rows":100,"resumed_from":0,"fetch_attempt":1}]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (11, 9, 1, 2, 1775992264000000, '[-1,"activity_completed"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (12, 1, 1, 1, 1775992320000000, '[-4,"flaky",{},null,null,null,"abandon",null,1,"b2d23ace93f575d7",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (12, 2, 1, 2, 1775992320000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (12, 3, 1, 3, 1775992321000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (12, 4, 1, 4, 1775992321000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (12, 5, 1, 6, 1775992321000000, '[-5,"e827fb7d5cb0a967","fail_first","v02_handlers:fail_first","default",1,3,[3,[3600],null,3600,null,null,[]],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (12, 6, 1, 7, 1775992321000000, '[-6,"e827fb7d5cb0a967","fail_first",1,"v01-host:1001:worker",5,[3600000000],null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (12, 7, 1, 11, 1775992321000000, '[-24,"e827fb7d5cb0a967","fail_first",1,5,6,"error",2,[3600000000],3600,3,{"exception_class":"ConnectionError","message":"upstream refused the first attempt","traceback":"Traceback (most recent call last):\n  File \"/tmp/wfctl-0.2/wfctl/handlers.py\", line 154, in run\n    returned = call(spec, state, ctx)\n               ^^^^^^^^^^^^^^^^^^^^^^\n  File \"/tmp/wfctl-0.2/wfctl/handlers.py\", line 75, in call\n    return function(state, ctx) if with_context else function(state)\n           ^^^^^^^^^^^^^^^^^^^^\n  File \"/work/main/tests/data/v02/v02_handlers.py\", line 36, in fail_first\n    raise ConnectionError(\"upstream refused the first attempt\")\nConnectionError: upstream refused the first attempt\n"}]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (13, 1, 1, 1, 1775992380000000, '[-4,"ingest",{"rows":250},null,null,null,"abandon",null,1,"67f4da1416ead234",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (13, 2, 1, 2, 1775992380000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (13, 3, 1, 3, 1775992381000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (13, 4, 1, 4, 1775992381000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (13, 5, 1, 6, 1775992381000000, '[-5,"1ce3bd92b5cf1d3e","fetch","v02_handlers:fetch","default",1,3,[3,[60,120,240],null,3600,null,null,[]],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (13, 6, 1, 7, 1775992382000000, '[-6,"1ce3bd92b5cf1d3e","fetch",1,"v01-gone:2002:lost",5,[3600000000],null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (13, 7, 1, 8, 1775992385000000, '[-16,"1ce3bd92b5cf1d3e","fetch",1,{"fetched":120},5,6,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (14, 1, 1, 1, 1775992386000000, '[-4,"ingest",{},null,null,null,"abandon",null,1,"8120fc081839aa33",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (14, 2, 1, 2, 1775992386000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (14, 3, 1, 3, 1775992387000000, '[-2,2,"v01-gone:2002:lost",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (15, 1, 1, 1, 1775992440000000, '[-4,"retried",{},null,null,null,"abandon",null,1,"e2c9321862bc7015",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (15, 10, 1, 4, 1775992442000000, '[-3,8,9]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (15, 11, 1, 30, 1775992442000000, '[-10,"activity","Activity load failed: warehouse unreachable","ConnectionError",null,"load"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (15, 12, 1, 36, 1775992442000000, '[3,2,11,3,"delay_seconds",3600,"cause","activity","next_attempt_at",[3600000000],2,"load","closed_status","failed",30,null,32,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (15, 2, 1, 2, 1775992440000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (15, 3, 1, 3, 1775992441000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (15, 4, 1, 4, 1775992441000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (15, 5, 1, 6, 1775992441000000, '[-5,"09f6b9309952e040","load","v02_handlers:load","default",1,1,[1,[60],null,3600,null,null,[]],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (15, 6, 1, 7, 1775992442000000, '[-6,"09f6b9309952e040","load",1,"v01-host:1001:worker",5,[3600000000],null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (15, 7, 1, 10, 1775992442000000, '[-28,"09f6b9309952e040","load",1,5,6,"error","ConnectionError","warehouse unreachable",true,1]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (15, 8, 1, 2, 1775992442000000, '[-1,"activity_failed"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (15, 9, 1, 3, 1775992442000000, '[-2,8,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (16, 1, 1, 1, 1775992460000000, '[-4,"kept",{},null,null,null,"abandon",null,1,"1ba6914863a3184e",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (16, 10, 1, 4, 1775992462000000, '[-3,8,9]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (16, 11, 1, 29, 1775992462000000, '[-8,["stored"]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (16, 2, 1, 2, 1775992460000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (16, 3, 1, 3, 1775992461000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (16, 4, 1, 4, 1775992461000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (16, 5, 1, 6, 1775992461000000, '[-5,"2e36b4b08e85bc41","store","v02_handlers:store","default",1,3,[3,[60,120,240],null,3600,null,null,[]],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (16, 6, 1, 7, 1775992462000000, '[-6,"2e36b4b08e85bc41","store",1,"v01-host:1001:worker",5,[3600000000],null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (16, 7, 1, 9, 1775992462000000, '[-7,"2e36b4b08e85bc41","store",1,5,6,{"stored":0}]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (16, 8, 1, 2, 1775992462000000, '[-1,"activity_completed"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (16, 9, 1, 3, 1775992462000000, '[-2,8,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (17, 1, 1, 1, 1775992500000000, '[-4,"poller",{"until":2},2592000,null,null,"abandon",null,1,"e444d12938a6bb9f",null,10,[2592000000000],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (17, 10, 1, 4, 1775992502000000, '[-3,8,9]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (17, 11, 1, 28, 1775992502000000, '[-14,"87ebf90546607e44",2,[2591998000000],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (17, 12, 2, 1, 1775992502000000, '[-15,"poller",{"until":2,"polls":1,"more":true},2592000,null,null,"abandon","e444d12938a6bb9f",2,"87ebf90546607e44",null,10,[2591998000000],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (17, 13, 2, 2, 1775992502000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (17, 14, 2, 3, 1775992503000000, '[-2,13,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (17, 15, 2, 4, 1775992503000000, '[-3,13,14]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (17, 16, 2, 6, 1775992503000000, '[-5,"d33daeb48bc7e43b","poll","v02_handlers:poll","default",1,3,[3,[60,120,240],null,3600,null,null,[]],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (17, 2, 1, 2, 1775992500000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (17, 3, 1, 3, 1775992501000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (17, 4, 1, 4, 1775992501000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (17, 5, 1, 6, 1775992501000000, '[-5,"1662211e0d27dbe7","poll","v02_handlers:poll","default",1,3,[3,[60,120,240],null,3600,null,null,[]],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (17, 6, 1, 7, 1775992502000000, '[-6,"1662211e0d27dbe7","poll",1,"v01-host:1001:worker",5,[3600000000],null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (17, 7, 1, 9, 1775992502000000, '[-7,"1662211e0d27dbe7","poll",1,5,6,{"polls":1,"more":true}]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (17, 8, 1, 2, 1775992502000000, '[-1,"activity_completed"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (17, 9, 1, 3, 1775992502000000, '[-2,8,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (18, 1, 1, 1, 1775992560000000, '[-4,"ingest",{},null,null,null,"abandon",null,1,"42ceeedb07a456d7",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (18, 2, 1, 2, 1775992560000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (18, 3, 1, 3, 1775992561000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (18, 4, 1, 4, 1775992561000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (18, 5, 1, 6, 1775992561000000, '[-5,"7b013c380726ed92","fetch","v02_handlers:fetch","default",1,3,[3,[60,120,240],null,3600,null,null,[]],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (19, 1, 1, 1, 1775992620000000, '[-4,"batch",{},null,null,null,"terminate",null,1,"af58d13c81d5560e",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (19, 2, 1, 2, 1775992620000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (19, 3, 1, 3, 1775992621000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (19, 4, 1, 4, 1775992621000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (19, 5, 1, 19, 1775992621000000, '[-11,"parent.import.bfa95203","707115a546cc1f9e","ingest","import"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (2, 1, 1, 1, 1775991660000000, '[-4,"ingest",{},null,null,null,"abandon",null,1,"14ee94e7b163b526",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (2, 10, 1, 13, 1775991663000000, '[-19,"2b0d8442d7e78bac","fetch",1,"cancelled",5,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (2, 11, 1, 33, 1775991663000000, '[-33,"cancel requested","no longer needed"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (2, 2, 1, 2, 1775991660000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (2, 3, 1, 3, 1775991661000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (2, 4, 1, 4, 1775991661000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (2, 5, 1, 6, 1775991661000000, '[-5,"2b0d8442d7e78bac","fetch","v02_handlers:fetch","default",1,3,[3,[60,120,240],null,3600,null,null,[]],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (2, 6, 1, 32, 1775991662000000, '[-1,"no longer needed"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (2, 7, 1, 2, 1775991662000000, '[-1,"cancel_requested"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (2, 8, 1, 3, 1775991663000000, '[-2,7,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (2, 9, 1, 4, 1775991663000000, '[-3,7,8]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (20, 1, 1, 1, 1775992621000000, '[-4,"ingest",{},null,null,null,"abandon","parent",1,"707115a546cc1f9e",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (20, 2, 1, 2, 1775992621000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (20, 3, 1, 3, 1775992621000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (20, 4, 1, 4, 1775992621000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (20, 5, 1, 6, 1775992621000000, '[-5,"e7b1fd4c28a28647","fetch","v02_handlers:fetch","default",1,3,[3,[60,120,240],null,3600,null,null,[]],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (21, 1, 1, 1, 1775992680000000, '[-4,"review",{},null,null,null,"abandon",null,1,"2c100a23801bddb1",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (21, 2, 1, 2, 1775992680000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (21, 3, 1, 3, 1775992681000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (21, 4, 1, 4, 1775992681000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (21, 5, 1, 6, 1775992681000000, '[-5,"658199a583c7fa55","prepare","v02_handlers:prepare","default",1,3,[3,[60,120,240],null,3600,null,null,[]],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (21, 6, 1, 18, 1775992682000000, '[-26,"go",{"approved_by":"ops"},true]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (22, 1, 1, 1, 1775992710000000, '[-4,"fanout",{},null,null,null,"abandon",null,1,"56238899d6aca6b8",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (22, 2, 1, 2, 1775992710000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (22, 3, 1, 3, 1775992711000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (22, 4, 1, 4, 1775992711000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (22, 5, 1, 6, 1775992711000000, '[-5,"4a0e88728ab010e8","fetch","v02_handlers:fetch","default",1,3,[3,[60,120,240],null,3600,null,null,[]],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (22, 6, 1, 6, 1775992711000000, '[-5,"eae02b27436324ec","store","v02_handlers:store","default",1,3,[3,[60,120,240],null,3600,null,null,[]],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (23, 1, 1, 1, 1775992740000000, '[-4,"ingest",{},null,null,null,"abandon",null,1,"a2eb7fa3aaed1746",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (23, 2, 1, 2, 1775992740000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (3, 1, 1, 1, 1775991720000000, '[-4,"approval",{},null,null,null,"abandon",null,1,"31eebea2df5a6ed9",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (3, 2, 1, 2, 1775991720000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (3, 3, 1, 3, 1775991721000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (3, 4, 1, 4, 1775991721000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (3, 5, 1, 17, 1775991721000000, '[-13,"approved","approved",null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (3, 6, 1, 34, 1775991722000000, '[-1,"operator stopped it"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (4, 1, 1, 1, 1775991780000000, '[-4,"loader",{},null,null,null,"abandon",null,1,"7685aae764fcfc19",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (4, 10, 1, 4, 1775991782000000, '[-3,8,9]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (4, 11, 1, 30, 1775991782000000, '[-10,"activity","Activity load failed: warehouse unreachable","ConnectionError",null,"load"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (4, 2, 1, 2, 1775991780000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (4, 3, 1, 3, 1775991781000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (4, 4, 1, 4, 1775991781000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (4, 5, 1, 6, 1775991781000000, '[-5,"b2ef43df0b3cd253","load","v02_handlers:load","default",1,1,[1,[60],null,3600,null,null,[]],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (4, 6, 1, 7, 1775991782000000, '[-6,"b2ef43df0b3cd253","load",1,"v01-host:1001:worker",5,[3600000000],null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (4, 7, 1, 10, 1775991782000000, '[-28,"b2ef43df0b3cd253","load",1,5,6,"error","ConnectionError","warehouse unreachable",true,1]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (4, 8, 1, 2, 1775991782000000, '[-1,"activity_failed"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (4, 9, 1, 3, 1775991782000000, '[-2,8,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (5, 1, 1, 1, 1775991840000000, '[-4,"report",{},null,null,null,"abandon",null,1,"423dac920e43cae7",60,10,null,[60000000],null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (5, 2, 1, 2, 1775991840000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (5, 3, 1, 3, 1775991841000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (5, 4, 1, 4, 1775991841000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (5, 5, 1, 17, 1775991841000000, '[-13,"data_ready","data_ready",null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (5, 6, 1, 2, 1775991900000000, '[-1,"deadline_expired"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (5, 7, 1, 3, 1775991900000000, '[-2,6,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (5, 8, 1, 4, 1775991900000000, '[-3,6,7]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (5, 9, 1, 31, 1775991900000000, '[-20,"run_timeout",[0],null,[0],"abandon","Workflow run deadline expired at 2026-04-12T11:05:00.000+00:00"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (6, 1, 1, 1, 1775991960000000, '[-4,"approval",{},null,null,null,"abandon",null,1,"d15c5c2b012ae806",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (6, 2, 1, 2, 1775991960000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (6, 3, 1, 3, 1775991961000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (6, 4, 1, 4, 1775991961000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (6, 5, 1, 17, 1775991961000000, '[-13,"approved","approved",null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (7, 1, 1, 1, 1775992020000000, '[-4,"approval_timed",{},null,null,null,"abandon",null,1,"549359692c212068",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (7, 2, 1, 2, 1775992020000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (7, 3, 1, 3, 1775992021000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (7, 4, 1, 4, 1775992021000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (7, 5, 1, 17, 1775992021000000, '[-13,"approved","approved",7200,[7200000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (7, 6, 1, 14, 1775992021000000, '[-9,"032b6cfe1cbc3313","approved","signal_timeout",7200,[7200000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (8, 1, 1, 1, 1775992080000000, '[-4,"nightly",{},null,null,null,"abandon",null,1,"b9726e1ad30e0520",null,10,null,null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (8, 10, 1, 4, 1775992081000000, '[-3,8,9]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (8, 11, 1, 14, 1775992081000000, '[-9,"57c335f3007fa694","delay 2h","delay",7200,[7200000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (8, 2, 1, 2, 1775992080000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (8, 3, 1, 3, 1775992081000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (8, 4, 1, 4, 1775992081000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (8, 5, 1, 6, 1775992081000000, '[-5,"6c1ab3516da37279","fetch","v02_handlers:fetch","default",1,3,[3,[60,120,240],null,3600,null,null,[]],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (8, 6, 1, 7, 1775992081000000, '[-6,"6c1ab3516da37279","fetch",1,"v01-host:1001:worker",5,[3600000000],null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (8, 7, 1, 9, 1775992081000000, '[-7,"6c1ab3516da37279","fetch",1,5,6,{"rows":100,"resumed_from":0,"fetch_attempt":1}]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (8, 8, 1, 2, 1775992081000000, '[-1,"activity_completed"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (8, 9, 1, 3, 1775992081000000, '[-2,8,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (9, 1, 1, 1, 1775992140000000, '[-4,"nightly",{},null,25920000,null,"abandon",null,1,"9ced0b731ba47769",null,10,null,null,[25920000000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (9, 10, 1, 4, 1775992141000000, '[-3,8,9]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (9, 11, 1, 14, 1775992141000000, '[-9,"8f9e20514d7b18a0","delay 2h","delay",7200,[7200000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (9, 2, 1, 2, 1775992140000000, '[-1,"started"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (9, 3, 1, 3, 1775992141000000, '[-2,2,"v01-host:1001:worker",[10000000]]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (9, 4, 1, 4, 1775992141000000, '[-3,2,3]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (9, 5, 1, 6, 1775992141000000, '[-5,"52416a35d0262733","fetch","v02_handlers:fetch","default",1,3,[3,[60,120,240],null,3600,null,null,[]],null,null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (9, 6, 1, 7, 1775992141000000, '[-6,"52416a35d0262733","fetch",1,"v01-host:1001:worker",5,[3600000000],null]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (9, 7, 1, 9, 1775992141000000, '[-7,"52416a35d0262733","fetch",1,5,6,{"rows":100,"resumed_from":0,"fetch_attempt":1}]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (9, 8, 1, 2, 1775992141000000, '[-1,"activity_completed"]');
INSERT INTO public.events (instance_key, seq, run_number, event_type, at, attributes) VALUES (9, 9, 1, 3, 1775992141000000, '[-2,8,"v01-host:1001:worker",[10000000]]');


--
-- Data for Name: failures; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.failures (failure_id, workflow_instance_id, workflow_run_id, activity_id, failure_category, propagation_kind, timeout_kind, exception_class, message, deadline_at, details, created_at) VALUES (1, 'failed', '7685aae764fcfc19', 'b2ef43df0b3cd253', 'activity', 'activity', NULL, 'ConnectionError', 'warehouse unreachable', NULL, NULL, '2026-04-12 11:03:02+00');
INSERT INTO public.failures (failure_id, workflow_instance_id, workflow_run_id, activity_id, failure_category, propagation_kind, timeout_kind, exception_class, message, deadline_at, details, created_at) VALUES (2, 'failed', '7685aae764fcfc19', 'b2ef43df0b3cd253', 'activity', 'activity', NULL, 'ConnectionError', 'Activity load failed: warehouse unreachable', NULL, NULL, '2026-04-12 11:03:02+00');
INSERT INTO public.failures (failure_id, workflow_instance_id, workflow_run_id, activity_id, failure_category, propagation_kind, timeout_kind, exception_class, message, deadline_at, details, created_at) VALUES (3, 'timed-out', '423dac920e43cae7', NULL, 'timeout', NULL, 'run_timeout', 'WorkflowTimeoutException', 'Workflow run deadline expired at 2026-04-12T11:05:00.000+00:00', '2026-04-12 11:05:00+00', NULL, '2026-04-12 11:05:00+00');
INSERT INTO public.failures (failure_id, workflow_instance_id, workflow_run_id, activity_id, failure_category, propagation_kind, timeout_kind, exception_class, message, deadline_at, details, created_at) VALUES (4, 'retried', 'e2c9321862bc7015', '09f6b9309952e040', 'activity', 'activity', NULL, 'ConnectionError', 'warehouse unreachable', NULL, NULL, '2026-04-12 11:14:02+00');
INSERT INTO public.failures (failure_id, workflow_instance_id, workflow_run_id, activity_id, failure_category, propagation_kind, timeout_kind, exception_class, message, deadline_at, details, created_at) VALUES (5, 'retried', 'e2c9321862bc7015', '09f6b9309952e040', 'activity', 'activity', NULL, 'ConnectionError', 'Activity load failed: warehouse unreachable', NULL, NULL, '2026-04-12 11:14:02+00');


--
-- Data for Name: instance_counts; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('approval', 'running', 0, 3);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('approval', 'running', 0, 6);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('approval', 'terminated', 1, 3);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('approval', 'waiting', 0, 3);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('approval', 'waiting', 1, 6);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('approval_timed', 'running', 0, 7);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('approval_timed', 'waiting', 1, 7);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('batch', 'running', 0, 3);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('batch', 'waiting', 1, 3);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('escalation', 'running', 1, 10);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('fanout', 'running', 1, 6);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('flaky', 'running', 1, 12);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('ingest', 'cancelled', 1, 2);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('ingest', 'completed', 1, 1);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('ingest', 'paused', 1, 11);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('ingest', 'running', 0, 1);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('ingest', 'running', 0, 11);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('ingest', 'running', 1, 13);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('ingest', 'running', 1, 14);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('ingest', 'running', 1, 2);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('ingest', 'running', 1, 3);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('ingest', 'running', 1, 7);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('kept', 'completed', 1, 0);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('kept', 'running', 0, 0);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('loader', 'failed', 1, 4);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('loader', 'running', 0, 4);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('nightly', 'running', 1, 8);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('nightly', 'running', 1, 9);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('poller', 'running', 1, 1);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('report', 'running', 0, 5);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('report', 'timed_out', 1, 5);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('report', 'waiting', 0, 5);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('retried', 'failed', 0, 15);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('retried', 'running', 1, 15);
INSERT INTO public.instance_counts (workflow_type, status, count, slot) VALUES ('review', 'running', 1, 5);


--
-- Data for Name: instances; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('backoff', 'flaky', 'e681906589e3aa58', 'running', 'b2d23ace93f575d7', 1, NULL, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:12:00+00', '2026-04-12 11:12:00+00', NULL, 0, 12, NULL, NULL, 12);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('buffered', 'review', 'e681906589e3aa58', 'running', '2c100a23801bddb1', 1, NULL, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:18:00+00', '2026-04-12 11:18:00+00', NULL, 0, 21, NULL, NULL, 21);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('cancelled', 'ingest', 'e681906589e3aa58', 'cancelled', '14ee94e7b163b526', 1, NULL, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:01:00+00', '2026-04-12 11:01:03+00', '2026-04-12 11:01:03+00', 0, 2, NULL, NULL, 2);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('completed', 'ingest', 'e681906589e3aa58', 'completed', '6800d8e7046a09b9', 1, NULL, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:00:00+00', '2026-04-12 11:00:01+00', '2026-04-12 11:00:01+00', 0, 1, NULL, NULL, 1);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('continued', 'poller', 'e681906589e3aa58', 'running', '87ebf90546607e44', 2, 2592000, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:15:00+00', '2026-04-12 11:15:02+00', NULL, 0, 17, NULL, NULL, 17);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('failed', 'loader', 'e681906589e3aa58', 'failed', '7685aae764fcfc19', 1, NULL, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:03:00+00', '2026-04-12 11:03:02+00', '2026-04-12 11:03:02+00', 0, 4, NULL, NULL, 4);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('fanout', 'fanout', 'e681906589e3aa58', 'running', '56238899d6aca6b8', 1, NULL, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:18:30+00', '2026-04-12 11:18:30+00', NULL, 0, 22, NULL, NULL, 22);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('far-deadline', 'nightly', 'e681906589e3aa58', 'running', '9ced0b731ba47769', 1, NULL, 25920000, '2027-02-06 11:09:00+00', NULL, 'abandon', NULL, '2026-04-12 11:09:00+00', '2026-04-12 11:09:01+00', NULL, 0, 9, NULL, NULL, 9);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('fresh', 'ingest', 'e681906589e3aa58', 'running', 'a2eb7fa3aaed1746', 1, NULL, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:19:00+00', '2026-04-12 11:19:00+00', NULL, 0, 23, NULL, NULL, 23);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('kept', 'kept', 'e681906589e3aa58', 'completed', '1ba6914863a3184e', 1, NULL, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:14:20+00', '2026-04-12 11:14:22+00', '2026-04-12 11:14:22+00', 0, 16, NULL, '2026-05-12 11:14:22+00', 16);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('lost-attempt', 'ingest', 'e681906589e3aa58', 'running', '67f4da1416ead234', 1, NULL, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:13:00+00', '2026-04-12 11:13:00+00', NULL, 0, 13, NULL, NULL, 13);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('lost-decision', 'ingest', 'e681906589e3aa58', 'running', '8120fc081839aa33', 1, NULL, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:13:06+00', '2026-04-12 11:13:06+00', NULL, 0, 14, NULL, NULL, 14);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('on-deadline', 'escalation', 'e681906589e3aa58', 'running', 'c75b9ce8a9c46aae', 1, NULL, 7200, '2026-04-12 13:10:00+00', 'v02_handlers:escalate', 'abandon', NULL, '2026-04-12 11:10:00+00', '2026-04-12 11:10:01+00', NULL, 0, 10, NULL, NULL, 10);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('parent', 'batch', 'e681906589e3aa58', 'waiting', 'af58d13c81d5560e', 1, NULL, NULL, NULL, NULL, 'terminate', NULL, '2026-04-12 11:17:00+00', '2026-04-12 11:17:01+00', NULL, 0, 19, NULL, NULL, 19);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('parent.import.bfa95203', 'ingest', 'e681906589e3aa58', 'running', '707115a546cc1f9e', 1, NULL, NULL, NULL, NULL, 'abandon', 'parent', '2026-04-12 11:17:01+00', '2026-04-12 11:17:01+00', NULL, 1, 20, NULL, NULL, 19);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('paused', 'ingest', 'e681906589e3aa58', 'paused', 'f83c686d4dc7bc17', 1, NULL, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:11:00+00', '2026-04-12 11:11:03+00', NULL, 0, 11, NULL, NULL, 11);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('queued', 'ingest', 'e681906589e3aa58', 'running', '42ceeedb07a456d7', 1, NULL, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:16:00+00', '2026-04-12 11:16:00+00', NULL, 0, 18, NULL, NULL, 18);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('retried', 'retried', 'e681906589e3aa58', 'running', 'e2c9321862bc7015', 1, NULL, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:14:00+00', '2026-04-12 11:14:02+00', NULL, 0, 15, '{"max_attempts":3,"backoff_seconds":[3600],"when":["activity","run_timeout","signal_wait"]}', NULL, 15);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('signal-timeout', 'approval_timed', 'e681906589e3aa58', 'waiting', '549359692c212068', 1, NULL, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:07:00+00', '2026-04-12 11:07:01+00', NULL, 0, 7, NULL, NULL, 7);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('terminated', 'approval', 'e681906589e3aa58', 'terminated', '31eebea2df5a6ed9', 1, NULL, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:02:00+00', '2026-04-12 11:02:02+00', '2026-04-12 11:02:02+00', 0, 3, NULL, NULL, 3);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('timed-out', 'report', 'e681906589e3aa58', 'timed_out', '423dac920e43cae7', 1, NULL, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:04:00+00', '2026-04-12 11:05:00+00', '2026-04-12 11:05:00+00', 0, 5, NULL, NULL, 5);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('timer', 'nightly', 'e681906589e3aa58', 'running', 'b9726e1ad30e0520', 1, NULL, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:08:00+00', '2026-04-12 11:08:01+00', NULL, 0, 8, NULL, NULL, 8);
INSERT INTO public.instances (workflow_instance_id, workflow_type, definitions_digest, status, current_run_id, run_count, execution_timeout_seconds, deadline_seconds, deadline_at, on_deadline, child_policy, parent_instance_id, created_at, updated_at, closed_at, child_depth, instance_key, retry_policy, retain_until, family_key) VALUES ('waiting-signal', 'approval', 'e681906589e3aa58', 'waiting', 'd15c5c2b012ae806', 1, NULL, NULL, NULL, NULL, 'abandon', NULL, '2026-04-12 11:06:00+00', '2026-04-12 11:06:01+00', NULL, 0, 6, NULL, NULL, 6);


--
-- Data for Name: pruning; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: runs; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('14ee94e7b163b526', 'cancelled', 1, 'cancelled', 'cancelled', NULL, NULL, NULL, 10, NULL, NULL, NULL, 0, 1, NULL, 1, '{}', 1, NULL, NULL, '2026-04-12 11:01:00+00', '2026-04-12 11:01:03+00', 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('1ba6914863a3184e', 'kept', 1, 'completed', 'completed', NULL, NULL, NULL, 10, NULL, NULL, NULL, 1, 0, NULL, 0, '{"stored":0}', 1, NULL, NULL, '2026-04-12 11:14:20+00', '2026-04-12 11:14:22+00', 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('2c100a23801bddb1', 'buffered', 1, 'running', NULL, NULL, NULL, NULL, 10, NULL, NULL, NULL, 0, 1, NULL, 0, '{}', 1, NULL, NULL, '2026-04-12 11:18:00+00', NULL, 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('31eebea2df5a6ed9', 'terminated', 1, 'terminated', 'terminated', NULL, NULL, NULL, 10, NULL, NULL, NULL, 0, 1, NULL, 0, '{}', 1, NULL, NULL, '2026-04-12 11:02:00+00', '2026-04-12 11:02:02+00', 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('423dac920e43cae7', 'timed-out', 1, 'timed_out', 'run_timeout', 60, NULL, '2026-04-12 11:05:00+00', 10, NULL, NULL, NULL, 0, 1, NULL, 0, '{}', 1, 3, NULL, '2026-04-12 11:04:00+00', '2026-04-12 11:05:00+00', 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('42ceeedb07a456d7', 'queued', 1, 'running', NULL, NULL, NULL, NULL, 10, NULL, NULL, NULL, 0, 1, NULL, 0, '{}', 1, NULL, NULL, '2026-04-12 11:16:00+00', NULL, 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('549359692c212068', 'signal-timeout', 1, 'waiting', NULL, NULL, NULL, NULL, 10, NULL, NULL, NULL, 0, 1, 'signal', 0, '{}', 1, NULL, NULL, '2026-04-12 11:07:00+00', NULL, 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('56238899d6aca6b8', 'fanout', 1, 'running', NULL, NULL, NULL, NULL, 10, NULL, NULL, NULL, 0, 1, NULL, 0, '{}', 1, NULL, NULL, '2026-04-12 11:18:30+00', NULL, 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('67f4da1416ead234', 'lost-attempt', 1, 'running', NULL, NULL, NULL, NULL, 10, NULL, NULL, NULL, 0, 1, NULL, 0, '{"rows":250}', 1, NULL, NULL, '2026-04-12 11:13:00+00', NULL, 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('6800d8e7046a09b9', 'completed', 1, 'completed', 'completed', NULL, NULL, NULL, 10, NULL, NULL, NULL, 2, 0, NULL, 0, '{"rows":7,"resumed_from":0,"fetch_attempt":1,"stored":7}', 1, NULL, NULL, '2026-04-12 11:00:00+00', '2026-04-12 11:00:01+00', 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('707115a546cc1f9e', 'parent.import.bfa95203', 1, 'running', NULL, NULL, NULL, NULL, 10, NULL, NULL, NULL, 0, 1, NULL, 0, '{}', 1, NULL, NULL, '2026-04-12 11:17:01+00', NULL, 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('7685aae764fcfc19', 'failed', 1, 'failed', 'activity', NULL, NULL, NULL, 10, NULL, NULL, NULL, 0, 1, NULL, 0, '{}', 1, 2, NULL, '2026-04-12 11:03:00+00', '2026-04-12 11:03:02+00', 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('8120fc081839aa33', 'lost-decision', 1, 'running', NULL, NULL, NULL, NULL, 10, NULL, NULL, NULL, 0, 0, NULL, 0, '{}', 1, NULL, NULL, '2026-04-12 11:13:06+00', NULL, 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('87ebf90546607e44', 'continued', 2, 'running', NULL, NULL, '2026-05-12 11:15:00+00', NULL, 10, NULL, NULL, NULL, 0, 1, NULL, 0, '{"until":2,"polls":1,"more":true}', 12, NULL, NULL, '2026-04-12 11:15:02+00', NULL, 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('9ced0b731ba47769', 'far-deadline', 1, 'running', NULL, NULL, NULL, NULL, 10, '2027-02-06 11:09:00+00', NULL, NULL, 1, 1, 'timer', 0, '{"rows":100,"resumed_from":0,"fetch_attempt":1}', 1, NULL, NULL, '2026-04-12 11:09:00+00', NULL, 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('a2eb7fa3aaed1746', 'fresh', 1, 'running', NULL, NULL, NULL, NULL, 10, NULL, NULL, NULL, 0, 0, NULL, 0, '{}', 1, NULL, NULL, '2026-04-12 11:19:00+00', NULL, 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('af58d13c81d5560e', 'parent', 1, 'waiting', NULL, NULL, NULL, NULL, 10, NULL, NULL, NULL, 0, 1, 'child', 0, '{}', 1, NULL, NULL, '2026-04-12 11:17:00+00', NULL, 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('b2d23ace93f575d7', 'backoff', 1, 'running', NULL, NULL, NULL, NULL, 10, NULL, NULL, NULL, 0, 1, NULL, 0, '{}', 1, NULL, NULL, '2026-04-12 11:12:00+00', NULL, 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('b9726e1ad30e0520', 'timer', 1, 'running', NULL, NULL, NULL, NULL, 10, NULL, NULL, NULL, 1, 1, 'timer', 0, '{"rows":100,"resumed_from":0,"fetch_attempt":1}', 1, NULL, NULL, '2026-04-12 11:08:00+00', NULL, 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('c75b9ce8a9c46aae', 'on-deadline', 1, 'running', NULL, NULL, NULL, NULL, 10, '2026-04-12 13:10:00+00', NULL, NULL, 0, 1, 'timer', 0, '{"ticket":"T-7"}', 1, NULL, NULL, '2026-04-12 11:10:00+00', NULL, 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('d15c5c2b012ae806', 'waiting-signal', 1, 'waiting', NULL, NULL, NULL, NULL, 10, NULL, NULL, NULL, 0, 1, 'signal', 0, '{}', 1, NULL, NULL, '2026-04-12 11:06:00+00', NULL, 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('e2c9321862bc7015', 'retried', 1, 'running', NULL, NULL, NULL, NULL, 10, NULL, NULL, NULL, 0, 0, 'retry', 0, '{}', 1, 5, NULL, '2026-04-12 11:14:00+00', NULL, 0, 2);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('e444d12938a6bb9f', 'continued', 1, 'continued_as_new', 'continued_as_new', NULL, '2026-05-12 11:15:00+00', NULL, 10, NULL, NULL, NULL, 1, 0, NULL, 0, '{"until":2,"polls":1,"more":true}', 1, NULL, NULL, '2026-04-12 11:15:00+00', '2026-04-12 11:15:02+00', 0, 1);
INSERT INTO public.runs (workflow_run_id, workflow_instance_id, run_number, status, closed_reason, run_timeout_seconds, execution_deadline_at, run_deadline_at, workflow_task_timeout_seconds, deadline_at, deadline_claimed_by, deadline_claimed_at, step_index, step_started, wait_kind, cancel_requested, state, first_seq, failure_id, continued_to_run_id, started_at, closed_at, rejected_starts, retry_attempt) VALUES ('f83c686d4dc7bc17', 'paused', 1, 'paused', NULL, NULL, NULL, NULL, 10, NULL, NULL, NULL, 0, 1, NULL, 0, '{"rows":100,"resumed_from":0,"fetch_attempt":1}', 1, NULL, NULL, '2026-04-12 11:11:00+00', NULL, 0, 1);


--
-- Data for Name: signals; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.signals (signal_id, workflow_instance_id, name, data, received_at, received_event_id, consumed_run_id, consumed_step_index, consumed_at) VALUES (1, 'buffered', 'go', '{"approved_by":"ops"}', '2026-04-12 11:18:02+00', 6, NULL, NULL, NULL);


--
-- Data for Name: timeout_event_counts; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.timeout_event_counts (event_type, timeout_kind, failure_category, count) VALUES ('ActivityRetryScheduled', '', '', 1);
INSERT INTO public.timeout_event_counts (event_type, timeout_kind, failure_category, count) VALUES ('WorkflowFailed', '', 'activity', 2);
INSERT INTO public.timeout_event_counts (event_type, timeout_kind, failure_category, count) VALUES ('WorkflowTimedOut', 'run_timeout', '', 1);


--
-- Data for Name: timers; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.timers (timer_id, workflow_run_id, workflow_instance_id, step_index, step, kind, fire_at, status, scheduled_event_id, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('032b6cfe1cbc3313', '549359692c212068', 'signal-timeout', 0, 'approved', 'signal_timeout', '2026-04-12 13:07:01+00', 'scheduled', 6, 0, NULL, 1);
INSERT INTO public.timers (timer_id, workflow_run_id, workflow_instance_id, step_index, step, kind, fire_at, status, scheduled_event_id, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('57c335f3007fa694', 'b9726e1ad30e0520', 'timer', 1, 'delay 2h', 'delay', '2026-04-12 13:08:01+00', 'scheduled', 11, 0, NULL, 2);
INSERT INTO public.timers (timer_id, workflow_run_id, workflow_instance_id, step_index, step, kind, fire_at, status, scheduled_event_id, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('7ed6e755cd612854', 'c75b9ce8a9c46aae', 'on-deadline', 0, 'delay 1d', 'delay', '2026-04-13 11:10:01+00', 'scheduled', 5, 0, NULL, 4);
INSERT INTO public.timers (timer_id, workflow_run_id, workflow_instance_id, step_index, step, kind, fire_at, status, scheduled_event_id, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('8f9e20514d7b18a0', '9ced0b731ba47769', 'far-deadline', 1, 'delay 2h', 'delay', '2026-04-12 13:09:01+00', 'scheduled', 11, 0, NULL, 3);
INSERT INTO public.timers (timer_id, workflow_run_id, workflow_instance_id, step_index, step, kind, fire_at, status, scheduled_event_id, superseded, closed_at, rowid) OVERRIDING SYSTEM VALUE VALUES ('c82a85b166b3b1c3', 'e2c9321862bc7015', 'retried', 0, 'load', 'workflow_retry', '2026-04-12 12:14:02+00', 'scheduled', 12, 0, NULL, 5);


--
-- Data for Name: wfctl_migrations; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.wfctl_migrations (version, name, applied_at) VALUES (1, 'p001_initial', '2026-04-12 11:00:00+00');
INSERT INTO public.wfctl_migrations (version, name, applied_at) VALUES (2, 'p002_workflow_retry_and_retention', '2026-04-12 11:00:00+00');
INSERT INTO public.wfctl_migrations (version, name, applied_at) VALUES (3, 'p003_workflow_families', '2026-04-12 11:00:00+00');
INSERT INTO public.wfctl_migrations (version, name, applied_at) VALUES (4, 'p004_pruning', '2026-04-12 11:00:00+00');
INSERT INTO public.wfctl_migrations (version, name, applied_at) VALUES (5, 'p005_instance_counts_by_family', '2026-04-12 11:00:00+00');
INSERT INTO public.wfctl_migrations (version, name, applied_at) VALUES (6, 'p006_worker_host_id', '2026-04-12 11:00:00+00');
INSERT INTO public.wfctl_migrations (version, name, applied_at) VALUES (7, 'p007_claims_by_the_ready_index', '2026-04-12 11:00:00+00');


--
-- Data for Name: workers; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.workers (worker_id, kind, hostname, pid, pid_started, queues, started_at, heartbeat_at, lease_expires_at, stopped_at, host_id) VALUES ('v01-gone:2002:lost', 'worker', 'v01-gone', 2002, NULL, 'default', '2026-04-12 11:13:00+00', '2026-04-12 11:13:00+00', '2026-04-12 11:13:30+00', NULL, NULL);


--
-- Data for Name: workflow_tasks; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.workflow_tasks (task_id, workflow_run_id, workflow_instance_id, status, reason, available_at, scheduled_event_id, started_event_id, owner, started_at, timeout_at, closed_at) VALUES (16, '8120fc081839aa33', 'lost-decision', 'started', 'started', '2026-04-12 11:13:06+00', 2, 3, 'v01-gone:2002:lost', '2026-04-12 11:13:07+00', '2026-04-12 11:13:17+00', NULL);
INSERT INTO public.workflow_tasks (task_id, workflow_run_id, workflow_instance_id, status, reason, available_at, scheduled_event_id, started_event_id, owner, started_at, timeout_at, closed_at) VALUES (26, 'a2eb7fa3aaed1746', 'fresh', 'scheduled', 'started', '2026-04-12 11:19:00+00', 2, NULL, NULL, NULL, NULL, NULL);


--
-- Name: activities_rowid_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.activities_rowid_seq', 18, true);


--
-- Name: children_rowid_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.children_rowid_seq', 1, true);


--
-- Name: failures_failure_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.failures_failure_id_seq', 5, true);


--
-- Name: instances_instance_key_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.instances_instance_key_seq', 23, true);


--
-- Name: signals_signal_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.signals_signal_id_seq', 1, true);


--
-- Name: timers_rowid_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.timers_rowid_seq', 5, true);


--
-- Name: workflow_tasks_task_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.workflow_tasks_task_id_seq', 26, true);


--
-- Name: activities activities_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.activities
    ADD CONSTRAINT activities_pkey PRIMARY KEY (activity_id);


--
-- Name: children children_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.children
    ADD CONSTRAINT children_pkey PRIMARY KEY (child_instance_id);


--
-- Name: definitions definitions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.definitions
    ADD CONSTRAINT definitions_pkey PRIMARY KEY (digest);


--
-- Name: events events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.events
    ADD CONSTRAINT events_pkey PRIMARY KEY (instance_key, seq);


--
-- Name: failures failures_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.failures
    ADD CONSTRAINT failures_pkey PRIMARY KEY (failure_id);


--
-- Name: instance_counts instance_counts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.instance_counts
    ADD CONSTRAINT instance_counts_pkey PRIMARY KEY (workflow_type, status, slot);


--
-- Name: instances instances_instance_key_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.instances
    ADD CONSTRAINT instances_instance_key_key UNIQUE (instance_key);


--
-- Name: instances instances_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.instances
    ADD CONSTRAINT instances_pkey PRIMARY KEY (workflow_instance_id);


--
-- Name: pruning pruning_instance_key_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pruning
    ADD CONSTRAINT pruning_instance_key_key UNIQUE (instance_key);


--
-- Name: pruning pruning_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pruning
    ADD CONSTRAINT pruning_pkey PRIMARY KEY (workflow_instance_id);


--
-- Name: runs runs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (workflow_run_id);


--
-- Name: runs runs_workflow_instance_id_run_number_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_workflow_instance_id_run_number_key UNIQUE (workflow_instance_id, run_number);


--
-- Name: signals signals_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.signals
    ADD CONSTRAINT signals_pkey PRIMARY KEY (signal_id);


--
-- Name: timeout_event_counts timeout_event_counts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.timeout_event_counts
    ADD CONSTRAINT timeout_event_counts_pkey PRIMARY KEY (event_type, timeout_kind, failure_category);


--
-- Name: timers timers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.timers
    ADD CONSTRAINT timers_pkey PRIMARY KEY (timer_id);


--
-- Name: wfctl_migrations wfctl_migrations_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.wfctl_migrations
    ADD CONSTRAINT wfctl_migrations_name_key UNIQUE (name);


--
-- Name: wfctl_migrations wfctl_migrations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.wfctl_migrations
    ADD CONSTRAINT wfctl_migrations_pkey PRIMARY KEY (version);


--
-- Name: workers workers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workers
    ADD CONSTRAINT workers_pkey PRIMARY KEY (worker_id);


--
-- Name: workflow_tasks workflow_tasks_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workflow_tasks
    ADD CONSTRAINT workflow_tasks_pkey PRIMARY KEY (task_id);


--
-- Name: activities_close_deadline; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX activities_close_deadline ON public.activities USING btree (close_deadline_at) WHERE ((status = 'started'::text) AND (close_deadline_at IS NOT NULL));


--
-- Name: activities_heartbeat_deadline; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX activities_heartbeat_deadline ON public.activities USING btree (heartbeat_deadline_at) WHERE ((status = 'started'::text) AND (heartbeat_deadline_at IS NOT NULL));


--
-- Name: activities_owner; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX activities_owner ON public.activities USING btree (owner) WHERE (status = 'started'::text);


--
-- Name: activities_ready; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX activities_ready ON public.activities USING btree (queue, available_at, rowid) WHERE (status = ANY (ARRAY['scheduled'::text, 'retry_scheduled'::text]));


--
-- Name: activities_schedule_deadline; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX activities_schedule_deadline ON public.activities USING btree (schedule_deadline_at) WHERE ((status = ANY (ARRAY['scheduled'::text, 'retry_scheduled'::text])) AND (schedule_deadline_at IS NOT NULL));


--
-- Name: activities_step; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX activities_step ON public.activities USING btree (workflow_run_id, step_index, branch_index);


--
-- Name: activities_total_deadline; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX activities_total_deadline ON public.activities USING btree (schedule_to_close_deadline_at) WHERE ((status = ANY (ARRAY['scheduled'::text, 'retry_scheduled'::text, 'started'::text])) AND (schedule_to_close_deadline_at IS NOT NULL));


--
-- Name: children_parent; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX children_parent ON public.children USING btree (parent_run_id, step_index, branch_index);


--
-- Name: failures_run; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX failures_run ON public.failures USING btree (workflow_run_id);


--
-- Name: instances_closed; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX instances_closed ON public.instances USING btree (closed_at) WHERE (closed_at IS NOT NULL);


--
-- Name: instances_created; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX instances_created ON public.instances USING btree (created_at, instance_key);


--
-- Name: instances_retain_until; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX instances_retain_until ON public.instances USING btree (retain_until) WHERE (retain_until IS NOT NULL);


--
-- Name: instances_status_created; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX instances_status_created ON public.instances USING btree (status, created_at, instance_key);


--
-- Name: instances_type_created; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX instances_type_created ON public.instances USING btree (workflow_type, created_at, instance_key);


--
-- Name: runs_deadline; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_deadline ON public.runs USING btree (deadline_at) WHERE ((status = 'running'::text) AND (deadline_at IS NOT NULL) AND (deadline_claimed_at IS NULL));


--
-- Name: runs_deadline_claimed; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_deadline_claimed ON public.runs USING btree (deadline_claimed_at) WHERE ((deadline_claimed_at IS NOT NULL) AND (closed_at IS NULL));


--
-- Name: runs_execution_deadline; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_execution_deadline ON public.runs USING btree (execution_deadline_at) WHERE ((closed_at IS NULL) AND (execution_deadline_at IS NOT NULL));


--
-- Name: runs_run_deadline; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_run_deadline ON public.runs USING btree (run_deadline_at) WHERE ((closed_at IS NULL) AND (run_deadline_at IS NOT NULL));


--
-- Name: signals_consumed; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX signals_consumed ON public.signals USING btree (consumed_run_id, consumed_step_index) WHERE (consumed_at IS NOT NULL);


--
-- Name: signals_instance; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX signals_instance ON public.signals USING btree (workflow_instance_id);


--
-- Name: signals_pending; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX signals_pending ON public.signals USING btree (workflow_instance_id, name, signal_id) WHERE (consumed_at IS NULL);


--
-- Name: timers_due; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX timers_due ON public.timers USING btree (fire_at) WHERE (status = 'scheduled'::text);


--
-- Name: timers_signal_timeout; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX timers_signal_timeout ON public.timers USING btree (fire_at) WHERE ((status = 'scheduled'::text) AND (kind = 'signal_timeout'::text));


--
-- Name: timers_step; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX timers_step ON public.timers USING btree (workflow_run_id, step_index);


--
-- Name: workers_live; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX workers_live ON public.workers USING btree (lease_expires_at) WHERE (stopped_at IS NULL);


--
-- Name: workflow_tasks_open; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX workflow_tasks_open ON public.workflow_tasks USING btree (workflow_run_id) WHERE (status = ANY (ARRAY['scheduled'::text, 'started'::text]));


--
-- Name: workflow_tasks_owner; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX workflow_tasks_owner ON public.workflow_tasks USING btree (owner) WHERE (status = 'started'::text);


--
-- Name: workflow_tasks_ready; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX workflow_tasks_ready ON public.workflow_tasks USING btree (available_at, task_id) WHERE (status = 'scheduled'::text);


--
-- Name: workflow_tasks_run; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX workflow_tasks_run ON public.workflow_tasks USING btree (workflow_run_id);


--
-- Name: workflow_tasks_timeout; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX workflow_tasks_timeout ON public.workflow_tasks USING btree (timeout_at) WHERE ((status = 'started'::text) AND (timeout_at IS NOT NULL));


--
-- Name: events events_are_append_only; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER events_are_append_only BEFORE DELETE OR UPDATE ON public.events FOR EACH ROW EXECUTE FUNCTION public.wfctl_history_is_append_only();


--
-- Name: events events_are_append_only_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER events_are_append_only_truncate BEFORE TRUNCATE ON public.events FOR EACH STATEMENT EXECUTE FUNCTION public.wfctl_history_is_append_only();


--
-- Name: instances instance_counts_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER instance_counts_insert AFTER INSERT OR DELETE ON public.instances FOR EACH ROW EXECUTE FUNCTION public.wfctl_count_instances();


--
-- Name: instances instance_counts_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER instance_counts_update AFTER UPDATE OF workflow_type, status ON public.instances FOR EACH ROW WHEN (((old.status IS DISTINCT FROM new.status) OR (old.workflow_type IS DISTINCT FROM new.workflow_type))) EXECUTE FUNCTION public.wfctl_count_instances();


--
-- Name: instances instances_family; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER instances_family BEFORE INSERT OR UPDATE OF parent_instance_id ON public.instances FOR EACH ROW EXECUTE FUNCTION public.wfctl_family_key();


--
-- Name: activities activities_workflow_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.activities
    ADD CONSTRAINT activities_workflow_run_id_fkey FOREIGN KEY (workflow_run_id) REFERENCES public.runs(workflow_run_id);


--
-- Name: children children_child_instance_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.children
    ADD CONSTRAINT children_child_instance_id_fkey FOREIGN KEY (child_instance_id) REFERENCES public.instances(workflow_instance_id);


--
-- Name: children children_parent_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.children
    ADD CONSTRAINT children_parent_run_id_fkey FOREIGN KEY (parent_run_id) REFERENCES public.runs(workflow_run_id);


--
-- Name: instances instances_definitions_digest_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.instances
    ADD CONSTRAINT instances_definitions_digest_fkey FOREIGN KEY (definitions_digest) REFERENCES public.definitions(digest);


--
-- Name: pruning pruning_workflow_instance_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pruning
    ADD CONSTRAINT pruning_workflow_instance_id_fkey FOREIGN KEY (workflow_instance_id) REFERENCES public.instances(workflow_instance_id);


--
-- Name: runs runs_workflow_instance_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_workflow_instance_id_fkey FOREIGN KEY (workflow_instance_id) REFERENCES public.instances(workflow_instance_id);


--
-- Name: signals signals_workflow_instance_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.signals
    ADD CONSTRAINT signals_workflow_instance_id_fkey FOREIGN KEY (workflow_instance_id) REFERENCES public.instances(workflow_instance_id);


--
-- Name: timers timers_workflow_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.timers
    ADD CONSTRAINT timers_workflow_run_id_fkey FOREIGN KEY (workflow_run_id) REFERENCES public.runs(workflow_run_id);


--
-- Name: workflow_tasks workflow_tasks_workflow_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workflow_tasks
    ADD CONSTRAINT workflow_tasks_workflow_run_id_fkey FOREIGN KEY (workflow_run_id) REFERENCES public.runs(workflow_run_id);


--
-- PostgreSQL database dump complete
--

\unrestrict wfctl02

