{{- if .SQLAPI}}{{$l := .Limits}}
-- Only for table sets with Config.SQLAPI (postbox migrate up --sql-api): the SQL enqueue API of docs/SCHEMA.md,
-- for producers in any language. Each routine is named after the outbox table and lives in its schema. The
-- limits below are rendered from the Go constants Enqueue checks (package driver), never typed here.
--
-- Wake-ups: a NOTIFY in every transaction serialises commits, so the API sends at most one per
-- {{$l.NotifyMillis}}ms across every session: this sequence holds the last interval that sent one. Sequences are
-- not transactional and take no lock a commit waits on; two sessions that race both notify, which is harmless.
CREATE SEQUENCE IF NOT EXISTS {{.OutboxTable "_wake_seq"}};
-- A UUIDv7 (RFC 9562) whose 12-bit rand_a field holds the fraction of the millisecond, so that IDs made by
-- different sessions sort by time. One session's IDs strictly increase, as one Go process's do: the last
-- timestamp lives in a session setting, and an ID that would not be greater takes the next value after it.
CREATE OR REPLACE FUNCTION {{.Func "_new_id"}}() RETURNS uuid LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    us   bigint := floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
    v    bigint := (us / 1000) * 4096 + (us % 1000) * 4096 / 1000;
    last bigint := coalesce(nullif(current_setting('postbox.last_id_time', true), '')::bigint, 0);
    done text;
BEGIN
    IF v <= last THEN
        v := last + 1;
    END IF;
    -- Assignments, not PERFORM: plpgsql evaluates them as simple expressions, without a query's executor.
    done := set_config('postbox.last_id_time', v::text, false);
    -- 48 bits of milliseconds, the version (7) and 12 bits of fraction, then 8 random bytes whose variant bits
    -- gen_random_uuid has set already.
    RETURN encode(decode(lpad(to_hex(v >> 12), 12, '0') || lpad(to_hex((v & 4095) | 28672), 4, '0'), 'hex')
        || substring(uuid_send(gen_random_uuid()) FROM 9 FOR 8), 'hex')::uuid;
END
$fn$;
-- Wakes listening relays unless a session did within the interval, and reports whether it sent the wake-up. The
-- notification is sent at commit, and only if the transaction commits.
CREATE OR REPLACE FUNCTION {{.Func "_wake"}}() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    slot bigint := floor(extract(epoch FROM clock_timestamp()) * 1000 / {{$l.NotifyMillis}})::bigint;
    done text;
BEGIN
    -- The session remembers the last slot it found taken, so that it reads the sequence once per slot at most.
    IF slot::text = current_setting({{.WakeSetting}}, true) THEN
        RETURN false;
    END IF;
    done := set_config({{.WakeSetting}}, slot::text, false);
    IF slot <= coalesce(pg_sequence_last_value({{.FuncLiteral "_wake_seq"}}::regclass), 0) THEN
        RETURN false;
    END IF;
    done := setval({{.FuncLiteral "_wake_seq"}}::regclass, slot)::text;
    PERFORM pg_notify({{.Channel}}, '');
    RETURN true;
END
$fn$;
-- Checks one message as Enqueue does and returns its headers as stored (NULL for none). at names the element of
-- a batch ('[3]', and the errors name the batch's arrays) or is '' for a single message. Errors have SQLSTATE 22023
-- (invalid_parameter_value) and are raised before anything is written, so a caller can catch one in a savepoint.
CREATE OR REPLACE FUNCTION {{.Func "_check"}}(topic text, type text, payload bytea, key text, headers jsonb, at text)
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $fn$
DECLARE
    h record;
    field text;
    val text;
    lim int;
    pay text := CASE WHEN $6 = '' THEN 'payload' ELSE 'payloads' || $6 END;
    hdr text := 'headers' || $6;
BEGIN
    -- Unrolled rather than a loop over a VALUES list, which would run a query on every call.
    IF $1 IS NULL OR $1 = '' THEN
        field := 'topic';
    ELSIF $2 IS NULL OR $2 = '' THEN
        field := 'type';
    END IF;
    IF field IS NOT NULL THEN
        field := CASE WHEN $6 = '' THEN field ELSE field || 's' || $6 END;
        RAISE EXCEPTION 'postbox: argument % is empty; every message needs one', field
            USING ERRCODE = '22023', COLUMN = field;
    END IF;
    IF octet_length($1) > {{$l.Topic}} THEN
        field := 'topic'; val := $1; lim := {{$l.Topic}};
    ELSIF octet_length($2) > {{$l.Type}} THEN
        field := 'type'; val := $2; lim := {{$l.Type}};
    ELSIF octet_length($4) > {{$l.Key}} THEN
        field := 'key'; val := $4; lim := {{$l.Key}};
    END IF;
    IF field IS NOT NULL THEN
        field := CASE WHEN $6 = '' THEN field ELSE field || 's' || $6 END;
        RAISE EXCEPTION 'postbox: argument % is % bytes; the limit is %', field, octet_length(val), lim
            USING ERRCODE = '22023', COLUMN = field;
    END IF;
    IF $1 ~ '{{.ControlClass}}' THEN
        field := 'topic'; val := $1;
    ELSIF $2 ~ '{{.ControlClass}}' THEN
        field := 'type'; val := $2;
    ELSIF $4 ~ '{{.ControlClass}}' THEN
        field := 'key'; val := $4;
    END IF;
    IF field IS NOT NULL THEN
        field := CASE WHEN $6 = '' THEN field ELSE field || 's' || $6 END;
        RAISE EXCEPTION 'postbox: argument % (%) contains a control character or a bidirectional override', field, quote_literal(val)
            USING ERRCODE = '22023', COLUMN = field;
    END IF;
    IF octet_length($3) > {{$l.Payload}} THEN
        RAISE EXCEPTION 'postbox: argument % is % bytes; the limit is %', pay, octet_length($3), {{$l.Payload}}
            USING ERRCODE = '22023', COLUMN = pay;
    END IF;
    IF $5 IS NULL OR jsonb_typeof($5) = 'null' THEN
        RETURN NULL;
    ELSIF jsonb_typeof($5) <> 'object' THEN
        RAISE EXCEPTION 'postbox: argument % is a JSON %; pass an object of string values, or NULL', hdr, jsonb_typeof($5)
            USING ERRCODE = '22023', COLUMN = hdr;
    END IF;
    IF (SELECT count(*) FROM jsonb_object_keys($5)) > {{$l.Headers}} THEN
        RAISE EXCEPTION 'postbox: argument % has % headers; the limit is %', hdr, (SELECT count(*) FROM jsonb_object_keys($5)), {{$l.Headers}}
            USING ERRCODE = '22023', COLUMN = hdr;
    END IF;
    FOR h IN SELECT e.key, e.value FROM jsonb_each($5) AS e LOOP
        IF h.key !~ '^[A-Za-z0-9._-]{1,{{$l.HeaderName}}}$' THEN
            RAISE EXCEPTION 'postbox: argument %: header name % is not allowed; use 1 to % letters, digits, ''-'', ''_'' or ''.''', hdr, quote_literal(h.key), {{$l.HeaderName}}
                USING ERRCODE = '22023', COLUMN = hdr;
        ELSIF lower(left(h.key, 3)) IN ('ce-', 'ce_') THEN
            RAISE EXCEPTION 'postbox: argument %: header % uses the CloudEvents prefix, which Postbox sets from the message fields', hdr, quote_literal(h.key)
                USING ERRCODE = '22023', COLUMN = hdr;
        ELSIF jsonb_typeof(h.value) <> 'string' THEN
            RAISE EXCEPTION 'postbox: argument %: header % is a JSON %; header values are strings', hdr, quote_literal(h.key), jsonb_typeof(h.value)
                USING ERRCODE = '22023', COLUMN = hdr;
        END IF;
        val := h.value #>> '{}';
        IF octet_length(val) > {{$l.Header}} THEN
            RAISE EXCEPTION 'postbox: argument %: header % is % bytes; the limit is %', hdr, quote_literal(h.key), octet_length(val), {{$l.Header}}
                USING ERRCODE = '22023', COLUMN = hdr;
        ELSIF val ~ '{{.ControlClass}}' THEN
            RAISE EXCEPTION 'postbox: argument %: header % contains a control character or a bidirectional override', hdr, quote_literal(h.key)
                USING ERRCODE = '22023', COLUMN = hdr;
        END IF;
    END LOOP;
    IF $5 = '{}'::jsonb THEN
        RETURN NULL; -- as Enqueue stores a message without headers
    END IF;
    RETURN $5;
END
$fn$;
-- Enqueues one message in the caller's transaction and returns its ID. topic and type are required; payload is
-- published as is (NULL is empty); key '' or NULL means none; headers is a JSON object of strings; available_at
-- delays delivery (NULL: at once).
CREATE OR REPLACE FUNCTION {{.Func "_enqueue"}}(topic text, type text, payload bytea, key text DEFAULT '',
    headers jsonb DEFAULT NULL, available_at timestamptz DEFAULT NULL)
RETURNS uuid LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    h   jsonb := {{.Func "_check"}}($1, $2, coalesce($3, '\x'::bytea), $4, $5, '');
    id  uuid := {{.Func "_new_id"}}();
    made timestamptz := clock_timestamp();
    woke boolean;
BEGIN
    INSERT INTO {{.Outbox}} (id, topic, key, type, payload, headers, available_at, created_at)
    VALUES (id, $1, coalesce($4, ''), $2, coalesce($3, '\x'::bytea), h, coalesce($6, made), made);
    woke := {{.Func "_wake"}}();
    RETURN id;
END
$fn$;
-- The same with a text payload, published as its UTF-8 bytes (JSON, for example).
CREATE OR REPLACE FUNCTION {{.Func "_enqueue"}}(topic text, type text, payload text, key text DEFAULT '',
    headers jsonb DEFAULT NULL, available_at timestamptz DEFAULT NULL)
RETURNS uuid LANGUAGE sql VOLATILE AS $fn$
    SELECT {{.Func "_enqueue"}}($1, $2, convert_to($3, 'UTF8'), $4, $5, $6)
$fn$;
-- Enqueues many messages with one statement: element i of each array is message i (arrays of one length; keys,
-- headers and available_at may be NULL for all). It checks every message before it writes any, inserts them
-- with one statement, wakes relays once and returns the IDs in the order of the arrays.
CREATE OR REPLACE FUNCTION {{.Func "_enqueue_batch"}}(topics text[], types text[], payloads bytea[],
    keys text[] DEFAULT NULL, headers jsonb[] DEFAULT NULL, available_at timestamptz[] DEFAULT NULL)
RETURNS SETOF uuid LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    n    int := coalesce(cardinality($1), 0);
    ids  uuid[] := '{}';
    hs   jsonb[] := '{}';
    made timestamptz := clock_timestamp();
    arg  text;
    len  int;
    woke boolean;
BEGIN
    FOR arg, len IN VALUES ('types', cardinality($2)), ('payloads', cardinality($3)), ('keys', coalesce(cardinality($4), n)),
        ('headers', coalesce(cardinality($5), n)), ('available_at', coalesce(cardinality($6), n)) LOOP
        IF len IS DISTINCT FROM n THEN
            RAISE EXCEPTION 'postbox: argument % has % elements and topics %; give every array one element per message', arg, coalesce(len, 0), n
                USING ERRCODE = '22023', COLUMN = arg;
        END IF;
    END LOOP;
    FOR i IN 1 .. n LOOP
        hs := hs || {{.Func "_check"}}($1[i], $2[i], coalesce($3[i], '\x'::bytea), $4[i], $5[i], '[' || i || ']');
        ids := ids || {{.Func "_new_id"}}();
    END LOOP;
    IF n = 0 THEN
        RETURN;
    END IF;
    INSERT INTO {{.Outbox}} (id, topic, key, type, payload, headers, available_at, created_at)
    SELECT u.id, u.topic, coalesce(u.key, ''), u.type, coalesce(u.payload, '\x'::bytea), u.headers, coalesce(u.at, made), made
    FROM unnest(ids, $1, $4, $2, $3, hs, $6) AS u(id, topic, key, type, payload, headers, at);
    woke := {{.Func "_wake"}}();
    RETURN QUERY SELECT unnest(ids);
END
$fn$;
-- The same with text payloads.
CREATE OR REPLACE FUNCTION {{.Func "_enqueue_batch"}}(topics text[], types text[], payloads text[],
    keys text[] DEFAULT NULL, headers jsonb[] DEFAULT NULL, available_at timestamptz[] DEFAULT NULL)
RETURNS SETOF uuid LANGUAGE sql VOLATILE AS $fn$
    SELECT * FROM {{.Func "_enqueue_batch"}}($1, $2, ARRAY(SELECT convert_to(p, 'UTF8') FROM unnest($3) WITH ORDINALITY AS t(p, i) ORDER BY i), $4, $5, $6)
$fn$;
{{- end}}
