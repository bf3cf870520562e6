#!/bin/bash
grep -cx falcon /app/inventory.dat > /app/total.txt
