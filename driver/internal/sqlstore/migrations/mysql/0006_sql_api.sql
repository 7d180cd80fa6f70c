{{- if .SQLAPI}}{{$l := .Limits}}
-- Only for table sets with Config.SQLAPI (postbox migrate up --sql-api): the SQL enqueue API of docs/SCHEMA.md,
-- for producers in any language, as procedures named after the outbox table (MySQL 8, MariaDB 10.10+, which
-- have RANDOM_BYTES). The limits are rendered from the Go constants Enqueue checks (package driver). MySQL has no
-- notifications: relays find what the procedure enqueues by polling. A routine's statements end at a line that
-- is END; alone.
DROP PROCEDURE IF EXISTS {{.Func "_new_id"}};
-- A UUIDv7 (RFC 9562) in BINARY(16), whose 12-bit rand_a field holds the fraction of the millisecond, so that
-- IDs made by different sessions sort by time. One session's IDs strictly increase, as one Go process's do: the
-- last timestamp lives in the session variable @postbox_last_id_time.
CREATE PROCEDURE {{.Func "_new_id"}}(OUT p_id BINARY(16), OUT p_us BIGINT)
NOT DETERMINISTIC NO SQL
BEGIN
    DECLARE v BIGINT;
    DECLARE rnd CHAR(16);
    SET p_us = CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED);
    SET v = (p_us DIV 1000) * 4096 + (p_us MOD 1000) * 4096 DIV 1000;
    IF v <= COALESCE(@postbox_last_id_time, 0) THEN
        SET v = @postbox_last_id_time + 1;
    END IF;
    SET @postbox_last_id_time = v;
    SET rnd = HEX(RANDOM_BYTES(8));
    -- 48 bits of milliseconds, the version (7), 12 bits of fraction, the variant (10) and 62 random bits.
    SET p_id = UNHEX(CONCAT(LPAD(HEX(v >> 12), 12, '0'), LPAD(HEX((v & 4095) | 28672), 4, '0'),
        LPAD(HEX((CONV(LEFT(rnd, 2), 16, 10) & 63) | 128), 2, '0'), SUBSTRING(rnd, 3)));
END;
DROP PROCEDURE IF EXISTS {{.Func "_check_text"}};
-- Checks one text argument as Enqueue does. Errors have SQLSTATE 22023 and name the argument; they are raised
-- before anything is written, and leave the caller's transaction as it was.
CREATE PROCEDURE {{.Func "_check_text"}}(IN p_arg VARCHAR(64), IN p_val LONGTEXT CHARACTER SET utf8mb4, IN p_required BOOLEAN, IN p_limit INT)
NOT DETERMINISTIC NO SQL
BEGIN
    DECLARE msg VARCHAR(128);
    IF p_required AND (p_val IS NULL OR LENGTH(p_val) = 0) THEN
        SET msg = CONCAT('postbox: argument ', p_arg, ' is empty; every message needs one');
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = msg;
    ELSEIF LENGTH(p_val) > p_limit THEN
        SET msg = CONCAT('postbox: argument ', p_arg, ' is ', LENGTH(p_val), ' bytes; the limit is ', p_limit);
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = msg;
    ELSEIF p_val REGEXP '{{.MySQLControlClass}}' THEN
        SET msg = CONCAT('postbox: argument ', p_arg, ' contains a control character or a bidirectional override');
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = msg;
    END IF;
END;
DROP PROCEDURE IF EXISTS {{.Func "_enqueue"}};
-- Enqueues one message in the caller's transaction and sets p_id to its ID in canonical text form. topic and
-- type are required; payload is published as is (NULL is empty); key '' or NULL means none; headers is a JSON
-- object of strings or NULL; available_at (in the session's time zone) delays delivery, NULL means at once.
--   CALL postbox_outbox_enqueue('orders', 'order.created', '{"id":1}', 'order-1', NULL, NULL, @id);
CREATE PROCEDURE {{.Func "_enqueue"}}(IN p_topic LONGTEXT CHARACTER SET utf8mb4, IN p_type LONGTEXT CHARACTER SET utf8mb4,
    IN p_payload LONGBLOB, IN p_key LONGTEXT CHARACTER SET utf8mb4, IN p_headers LONGTEXT CHARACTER SET utf8mb4,
    IN p_available_at DATETIME(6), OUT p_id CHAR(36))
NOT DETERMINISTIC MODIFIES SQL DATA
BEGIN
    DECLARE msg VARCHAR(128);
    DECLARE hnames LONGTEXT;
    DECLARE hname LONGTEXT CHARACTER SET utf8mb4;
    DECLARE val LONGTEXT;
    DECLARE i INT DEFAULT 0;
    DECLARE id BINARY(16);
    DECLARE us BIGINT;
    CALL {{.Func "_check_text"}}('topic', p_topic, TRUE, {{$l.Topic}});
    CALL {{.Func "_check_text"}}('type', p_type, TRUE, {{$l.Type}});
    CALL {{.Func "_check_text"}}('key', COALESCE(p_key, ''), FALSE, {{$l.Key}});
    IF LENGTH(p_payload) > {{$l.Payload}} THEN
        SET msg = CONCAT('postbox: argument payload is ', LENGTH(p_payload), ' bytes; the limit is {{$l.Payload}}');
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = msg;
    END IF;
    IF p_headers IS NOT NULL THEN
        IF NOT JSON_VALID(p_headers) OR JSON_TYPE(p_headers) <> 'OBJECT' THEN
            SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'postbox: argument headers is not a JSON object; pass an object of string values, or NULL';
        END IF;
        IF JSON_LENGTH(p_headers) > {{$l.Headers}} THEN
            SET msg = CONCAT('postbox: argument headers has ', JSON_LENGTH(p_headers), ' headers; the limit is {{$l.Headers}}');
            SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = msg;
        END IF;
        SET hnames = JSON_KEYS(p_headers);
        WHILE i < JSON_LENGTH(hnames) DO
            SET hname = JSON_UNQUOTE(JSON_EXTRACT(hnames, CONCAT('$[', i, ']')));
            IF NOT CAST(hname AS BINARY) REGEXP BINARY '^[A-Za-z0-9._-]{1,{{$l.HeaderName}}}$' THEN
                SET msg = LEFT(CONCAT('postbox: argument headers: header name ', QUOTE(hname), ' is not allowed; use letters, digits, - _ or .'), 128);
                SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = msg;
            ELSEIF LOWER(LEFT(hname, 3)) IN ('ce-', 'ce_') THEN
                SET msg = CONCAT('postbox: argument headers: header ', QUOTE(hname), ' uses the CloudEvents prefix');
                SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = msg;
            END IF;
            SET val = JSON_EXTRACT(p_headers, CONCAT('$."', hname, '"'));
            IF JSON_TYPE(val) <> 'STRING' THEN
                SET msg = CONCAT('postbox: argument headers: header ', QUOTE(hname), ' is not a JSON string');
                SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = msg;
            END IF;
            CALL {{.Func "_check_text"}}(LEFT(CONCAT('headers: header ', hname), 64), JSON_UNQUOTE(val), FALSE, {{$l.Header}});
            SET i = i + 1;
        END WHILE;
        IF JSON_LENGTH(p_headers) = 0 THEN
            SET p_headers = NULL; -- as Enqueue stores a message without headers
        END IF;
    END IF;
    CALL {{.Func "_new_id"}}(id, us);
    INSERT INTO {{.Outbox}} (id, topic, `key`, type, payload, headers, available_at, created_at)
    VALUES (id, p_topic, COALESCE(p_key, ''), p_type, COALESCE(p_payload, ''), p_headers,
        COALESCE(CAST(UNIX_TIMESTAMP(p_available_at) * 1000000 AS SIGNED), us), us);
    SET p_id = LOWER(CONCAT_WS('-', HEX(SUBSTRING(id, 1, 4)), HEX(SUBSTRING(id, 5, 2)), HEX(SUBSTRING(id, 7, 2)),
        HEX(SUBSTRING(id, 9, 2)), HEX(SUBSTRING(id, 11, 6))));
END;
{{- end}}
