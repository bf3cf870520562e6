#!/bin/bash
tr A-Z a-z < /app/inventory.lst > /app/figure.txt
