BEGIN;
INSERT INTO pgb_orders (customer, amount) VALUES ('customer', 1);
INSERT INTO pgb_tiny VALUES (1);
COMMIT;
