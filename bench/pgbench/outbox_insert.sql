BEGIN;
INSERT INTO pgb_orders (customer, amount) VALUES ('customer', 1);
INSERT INTO pgb_outbox (id, topic, key, type, payload, headers, available_at, created_at)
    VALUES (gen_random_uuid(), 'orders', 'k' || (random() * 1000)::int, 'order.created', '\x7b7d'::bytea, NULL, now(), now());
COMMIT;
