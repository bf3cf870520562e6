#!/bin/bash
grep -cx forest /app/orders.dat > /app/tally.txt
