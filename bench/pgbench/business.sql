BEGIN;
INSERT INTO pgb_orders (customer, amount) VALUES ('customer', 1);
COMMIT;
